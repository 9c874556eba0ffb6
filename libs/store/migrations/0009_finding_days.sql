-- Findings counted per UTC day, procedure, pattern and suppression, kept exact by triggers on
-- sop_findings (whatever writes it: a check saved, a re-check clearing the old results, the
-- patterns job, a verdict or an override). Insights reads these few rows for the whole days of
-- its window instead of every finding (bench/review.js); the partial days at the window's ends
-- are counted from the findings themselves. '' stands for "no pattern yet" (a key cannot be null).
CREATE TABLE sop_finding_days (
  workspace        text NOT NULL,
  day              date NOT NULL,
  procedure_id     text NOT NULL,
  rule_pattern_id  text NOT NULL,
  pattern_id       text NOT NULL,
  suppressed       boolean NOT NULL,
  n                integer NOT NULL,
  PRIMARY KEY (workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed)
);

-- One statement's rows applied at once, in key order, so two statements touching the same
-- days lock their rows in the same order.
CREATE FUNCTION sop_finding_days_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sop_finding_days AS d (workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed, n)
  SELECT workspace, (at AT TIME ZONE 'UTC')::date, procedure_id, COALESCE(rule_pattern_id, ''), COALESCE(pattern_id, ''), suppressed, count(*)
    FROM new_rows GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6
  ON CONFLICT (workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed) DO UPDATE SET n = d.n + EXCLUDED.n;
  RETURN NULL;
END $$;

CREATE FUNCTION sop_finding_days_remove() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE sop_finding_days AS d SET n = d.n - o.n
    FROM (SELECT workspace, (at AT TIME ZONE 'UTC')::date AS day, procedure_id, COALESCE(rule_pattern_id, '') AS rule_pattern_id,
                 COALESCE(pattern_id, '') AS pattern_id, suppressed, count(*) AS n
            FROM old_rows GROUP BY 1, 2, 3, 4, 5, 6 ORDER BY 1, 2, 3, 4, 5, 6) o
   WHERE d.workspace = o.workspace AND d.day = o.day AND d.procedure_id = o.procedure_id AND d.rule_pattern_id = o.rule_pattern_id
     AND d.pattern_id = o.pattern_id AND d.suppressed = o.suppressed;
  RETURN NULL;
END $$;

CREATE FUNCTION sop_finding_days_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO sop_finding_days AS d (workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed, n)
  SELECT workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed, sum(n) FROM (
    SELECT workspace, (at AT TIME ZONE 'UTC')::date AS day, procedure_id, COALESCE(rule_pattern_id, '') AS rule_pattern_id, COALESCE(pattern_id, '') AS pattern_id, suppressed, 1 AS n FROM new_rows
    UNION ALL
    SELECT workspace, (at AT TIME ZONE 'UTC')::date, procedure_id, COALESCE(rule_pattern_id, ''), COALESCE(pattern_id, ''), suppressed, -1 FROM old_rows
  ) x GROUP BY 1, 2, 3, 4, 5, 6 HAVING sum(n) <> 0 ORDER BY 1, 2, 3, 4, 5, 6
  ON CONFLICT (workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed) DO UPDATE SET n = d.n + EXCLUDED.n;
  RETURN NULL;
END $$;

CREATE TRIGGER sop_finding_days_insert AFTER INSERT ON sop_findings REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION sop_finding_days_add();
CREATE TRIGGER sop_finding_days_delete AFTER DELETE ON sop_findings REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION sop_finding_days_remove();
CREATE TRIGGER sop_finding_days_update AFTER UPDATE ON sop_findings REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION sop_finding_days_move();

INSERT INTO sop_finding_days (workspace, day, procedure_id, rule_pattern_id, pattern_id, suppressed, n)
SELECT workspace, (at AT TIME ZONE 'UTC')::date, procedure_id, COALESCE(rule_pattern_id, ''), COALESCE(pattern_id, ''), suppressed, count(*)
  FROM sop_findings GROUP BY 1, 2, 3, 4, 5, 6;
