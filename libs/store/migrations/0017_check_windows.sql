-- Insights counts procedure checks by the time of their session: the window's checks, per
-- procedure and result. Joining 100,000 sessions to their 150,000 checks for that was most of
-- Insights' time (bench/review.js), so each check carries its session's workspace and time,
-- copied when the check is saved, and one covering index answers the count alone.
--
-- The copy cannot go stale: a session's time (started_at, else received_at) changes only when
-- new content is received, and receiving it deletes the session's checks first, in the same
-- transaction; checks exist only for checked sessions (saved with the check's outcome).
ALTER TABLE sop_checks ADD COLUMN workspace text, ADD COLUMN at timestamptz;
UPDATE sop_checks c SET workspace = s.workspace, at = s.at FROM sop_sessions s WHERE s.id = c.session_id;

CREATE FUNCTION sop_checks_session_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  SELECT s.workspace, s.at INTO NEW.workspace, NEW.at FROM sop_sessions s WHERE s.id = NEW.session_id;
  RETURN NEW;
END $$;
CREATE TRIGGER sop_checks_session_at BEFORE INSERT ON sop_checks FOR EACH ROW EXECUTE FUNCTION sop_checks_session_at();

CREATE INDEX sop_checks_window ON sop_checks (workspace, at) INCLUDE (procedure_id, result, checked_result);
