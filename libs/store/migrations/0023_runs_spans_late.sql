-- Span retention takes again a run whose spans went and that received spans since (a late
-- export): this index holds only such runs (an expired run whose last receipt is after its
-- expiry), by that receipt, so the hourly pass finds them without reading every expired run.
CREATE INDEX IF NOT EXISTS runs_spans_late ON runs (last_seen_at) WHERE spans_expired_at IS NOT NULL AND last_seen_at > spans_expired_at;
