-- Runs stored with the id `.` or `..` (ingest took them before 2026-12-05; it refuses them now)
-- could not be opened: in a link or an API path those are a step up, not a name, and the api
-- refuses them (400 invalid_path). They are renamed `%2E` and `%2E%2E` (the dots percent-encoded
-- once, as text: in a path the id is encoded like any other, runs/%252E%252E), with their spans,
-- findings and question records, and the sessions made from them. A project that already holds a
-- run of the new name keeps the old one as it was.
CREATE TEMP TABLE dot_runs AS
  SELECT r.project, r.run_id AS old_id, replace(r.run_id, '.', '%2E') AS new_id
  FROM runs r
  WHERE r.run_id IN ('.', '..')
    AND NOT EXISTS (SELECT 1 FROM runs t WHERE t.project = r.project AND t.run_id = replace(r.run_id, '.', '%2E'));

-- A span's JSON names its run too: its run_id set, its fields kept in their order.
UPDATE spans x SET run_id = d.new_id,
  payload = (SELECT json_object_agg(e.k, CASE WHEN e.k = 'run_id' THEN to_json(d.new_id) ELSE e.v END ORDER BY e.n)
             FROM json_each(x.payload) WITH ORDINALITY AS e(k, v, n))
FROM dot_runs d WHERE x.project = d.project AND x.run_id = d.old_id;
UPDATE findings x SET run_id = d.new_id FROM dot_runs d WHERE x.project = d.project AND x.run_id = d.old_id;
UPDATE question_results x SET run_id = d.new_id FROM dot_runs d WHERE x.project = d.project AND x.run_id = d.old_id;
UPDATE question_pending x SET run_id = d.new_id FROM dot_runs d WHERE x.project = d.project AND x.run_id = d.old_id;
UPDATE sop_sessions x SET run_id = d.new_id FROM dot_runs d WHERE x.workspace = d.project AND x.run_id = d.old_id;
UPDATE runs x SET run_id = d.new_id FROM dot_runs d WHERE x.project = d.project AND x.run_id = d.old_id;
DROP TABLE dot_runs;
