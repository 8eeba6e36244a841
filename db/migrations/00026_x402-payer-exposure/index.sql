-- An x402 payer's unpaid exposure is bounded (docs/decisions/x402-payer-exposure.md): before a verified
-- payment is served, the edge sums the payer's payments verified but not yet settled, and looks for a
-- settlement of theirs the facilitator refused lately. Both look a payer's rows up by status.
create index x402_payments_payer_idx on x402_payments (payer, status, updated_at) where payer is not null;
