-- The live run page's incremental read (GET runs/{id}?since=: the run's spans stored after an
-- arrival number, in that order) and the run page's first read (the run's last arrival, where
-- the next look starts) read the run's spans by arrival. Through the primary key's prefix
-- (project, run_id) each look read every span of the run: a 50,000-span run followed live was a
-- scan of its 50,000 rows every poll. This index makes each an index range read of the spans
-- since (and of one row for the last arrival), in Postgres and in the embedded database alike.
CREATE INDEX IF NOT EXISTS spans_run_arrival ON spans (project, run_id, arrival);
