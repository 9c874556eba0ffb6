-- The problems list (Home, GET .../findings) reads a page's heads newest first and stops at the
-- page's last one (FindingsRepo.list), where it ranked every finding in the state asked for:
-- about 1 s a page with 75,000 open findings, 8-16 s on an embedded database with no statistics.
-- The heads of open (Home's default), active and resolved problems are read by status, so a page
-- skips none of another status; a candidate's group is looked at through (project, run_id,
-- group_name), which also serves what findings_run served (a run's findings), so it replaces it.
CREATE INDEX IF NOT EXISTS findings_status_newest ON findings (project, status, raised_at DESC, id DESC);
CREATE INDEX IF NOT EXISTS findings_run_group ON findings (project, run_id, group_name);
DROP INDEX IF EXISTS findings_run;
