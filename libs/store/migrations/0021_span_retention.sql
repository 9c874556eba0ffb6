-- Span retention (NEATROOTS_SPAN_RETENTION_DAYS): the spans of runs that started and were last
-- seen before the cutoff are deleted by the review service's hourly job; the run's row stays
-- (its counters, findings, problems and what they feed: Home, precision, patterns) and says when
-- its spans went. The index holds the runs whose spans are still there, by start: the job reads
-- the oldest of them, and the hot path (the runs upsert) rarely moves started_at.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS spans_expired_at timestamptz;
CREATE INDEX IF NOT EXISTS runs_spans_kept ON runs (started_at) WHERE spans_expired_at IS NULL;
