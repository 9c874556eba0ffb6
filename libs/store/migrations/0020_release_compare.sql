-- Insights' release compare reads the sessions checked on two releases and their findings:
-- without these it would read every session and finding of the workspace.
CREATE INDEX sop_sessions_release ON sop_sessions (workspace, release_id) WHERE status = 'checked';
CREATE INDEX sop_findings_release ON sop_findings (workspace, release_id) INCLUDE (rule_pattern_id, procedure_id, suppressed);
