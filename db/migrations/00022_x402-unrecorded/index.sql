-- An x402 payment settled at the facilitator whose ledger entries could not be written is kept as
-- `settled_unrecorded` (apps/edge/src/plugins/x402.ts). This keeps what the ledger pair needs (the
-- caller's key, the API, the item and its description), so an operator can record it later with
-- `npm run payments -- x402-record` exactly as the edge would have.
alter table x402_payments add column call jsonb;
create index x402_payments_unrecorded_idx on x402_payments (updated_at) where status = 'settled_unrecorded';
