-- Discovery's feedback signal reads the accounts' use of the last 30 days: usage_daily by day (its primary
-- key starts with the account, and the table keeps every day), and closing or deleting an account deletes
-- its listings by account.
create index usage_daily_day_idx on usage_daily (day);
create index discovery_listings_account_idx on discovery_listings (account_id, at);
