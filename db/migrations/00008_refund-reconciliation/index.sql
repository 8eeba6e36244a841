-- Refund reconciliation (see packages/core/billing/refunds.ts). The reconciler settles charges whose
-- outcome the edge could not record: it only looks at charges made after this migration, because
-- charges before it carried no usage event for instructions, doc sections and cookbook details.
create table refund_reconciliation (
  id             boolean primary key default true check (id),
  charges_since  timestamptz not null
);
insert into refund_reconciliation (charges_since) values (now());

-- The reconciler's scan: recent charges, oldest first.
create index ledger_entries_charges_at_idx on ledger_entries (created_at) where kind = 'charge';
create index usage_events_charge_idx on usage_events (charge_id) where charge_id is not null;
