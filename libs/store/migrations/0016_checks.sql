-- Database checks belong to a project (issue 14: checks saved through the API and over MCP).
-- Each project's API key writes its own checks, so two projects may each keep a check with
-- the same id and neither can replace or delete the other's; checks with no project (none
-- are written so today) share one namespace of their own.
ALTER TABLE db_checks DROP CONSTRAINT db_checks_pkey;
CREATE UNIQUE INDEX db_checks_project_id ON db_checks ((coalesce(project, '')), id);
