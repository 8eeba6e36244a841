-- A charge settled from a credit hold was paid for when the hold was taken: the hold kept that money
-- out of everyone's reach. A clawback (a refunded or disputed top-up) that lands while the hold is
-- open can still take the balance below what the hold's calls cost; those calls were answered, so
-- their rows must be written anyway, and the account is in debt as after any clawback
-- (accounts.clawback_debt). Until now the check refused such a row, and with it the whole settlement
-- of the edge's holds. Charges outside a hold still need the balance to cover them.
alter table ledger_entries drop constraint ledger_entries_charge_balance_check;
alter table ledger_entries add constraint ledger_entries_charge_balance_check
  check (kind <> 'charge' or hold_id is not null or balance_after_micros >= 0);
