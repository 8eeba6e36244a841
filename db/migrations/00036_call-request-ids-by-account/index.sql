-- A request id is looked up within an account (GET /api/v1/activity?requestId=, and an operator
-- given an account and an id), and ids a caller chooses are neither unique nor tied to one account:
-- a common one ("1", a client library's constant) would make a look-up by id alone read every
-- account's rows with it. The index of 00035 is replaced by one per account.
drop index if exists usage_events_request_idx;
create index usage_events_account_request_idx on usage_events (account_id, request_id) where request_id is not null;
