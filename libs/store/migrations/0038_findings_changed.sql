-- The run page followed live (GET runs/{id}?since=) carried every finding of the run on every
-- look, changed or not: 15,000 findings were 22.7 MB a poll, 50,000 more than the api takes from
-- the review service in one answer. A finding now records the transaction that last wrote it
-- (inserted, counted again, resolved, made active, dismissed, reopened: each statement that
-- writes findings sets it), and a run page's since cursor the database's snapshot when it was
-- read: a look reads only the findings written by a transaction not committed then, through
-- this index (from the snapshot's oldest transaction). The column is added without a default first, so existing rows are not rewritten
-- (NULL: written before any cursor); the default then applies to rows inserted from now on.
ALTER TABLE findings ADD COLUMN IF NOT EXISTS changed_xid xid8;
ALTER TABLE findings ALTER COLUMN changed_xid SET DEFAULT pg_current_xact_id();
CREATE INDEX IF NOT EXISTS findings_run_changed ON findings (project, run_id, changed_xid);
