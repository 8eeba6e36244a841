-- The request id of each metered call (the X-Request-Id its answer carried; for an MCP tool call,
-- the MCP request's), so that a call can be found from the id a caller quotes: in the activity
-- (GET /api/v1/activity?requestId=) and by an operator (docs/OPERATIONS.md), whether or not the
-- edge's log kept the call's line (LOG_REQUEST_SAMPLE; docs/decisions/request-id-on-usage.md).
-- Older events have none (null). A caller may send its own X-Request-Id, so an id is not unique.
alter table usage_events add column request_id text;
create index usage_events_request_idx on usage_events (request_id) where request_id is not null;
