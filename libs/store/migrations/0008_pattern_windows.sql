-- When each finding's session and each session happened, as stored columns, so the counts of
-- the review queue, the patterns list and Insights read narrow covering indexes (index-only
-- scans) instead of the wide rows (evidence, check bodies). Measured in bench/review.js.
ALTER TABLE sop_findings ADD COLUMN at timestamptz GENERATED ALWAYS AS (COALESCE(started_at, created_at)) STORED;
ALTER TABLE sop_sessions ADD COLUMN at timestamptz GENERATED ALWAYS AS (COALESCE(started_at, received_at)) STORED;
DROP INDEX sop_findings_window;
DROP INDEX sop_sessions_window;
CREATE INDEX sop_findings_window ON sop_findings (workspace, at) INCLUDE (procedure_id, rule_pattern_id, pattern_id, suppressed, created_at);
CREATE INDEX sop_findings_by_pattern ON sop_findings (workspace, pattern_id) INCLUDE (rule_pattern_id, suppressed, created_at, at);
CREATE INDEX sop_sessions_window ON sop_sessions (workspace, at) INCLUDE (status, result);
CREATE INDEX sop_checks_results ON sop_checks (session_id) INCLUDE (procedure_id, result, checked_result);
