-- The run page following a run live (GET runs/{id}?since=) looks every few seconds for the spans
-- stored since its last look, and its first read needs the run's last arrival, where the next look
-- starts. An index of spans by arrival would make every span written pay for it (0018 dropped
-- spans_order for that cost); the run's newest arrival is kept on its row instead, by the span
-- write that already updates the row: the first read is one row, and a look that finds nothing
-- new reads no span. A look after new spans reads the run's spans through the primary key's
-- prefix, as a page of the run does. NULL: no span stored since this migration (a run stored
-- before reads its spans once for it).
ALTER TABLE runs ADD COLUMN IF NOT EXISTS last_arrival bigint;
