-- Emptying sop_findings (TRUNCATE, directly or by a cascade) empties its day counts too, which
-- row and statement triggers on DELETE do not see.
CREATE FUNCTION sop_finding_days_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM sop_finding_days;
  RETURN NULL;
END $$;
CREATE TRIGGER sop_finding_days_truncate AFTER TRUNCATE ON sop_findings FOR EACH STATEMENT EXECUTE FUNCTION sop_finding_days_clear();
