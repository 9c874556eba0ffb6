-- Where a suggestion's pull request is: the repository (owner/repo) and the REST API it was
-- opened through, recorded when it is opened. It is followed there, not in whatever repository
-- the workspace's connection names later. Pull requests opened before this are taken to be in
-- the repository the connection names now (the best there is to go by).
ALTER TABLE sop_suggestions ADD COLUMN pr_repository text, ADD COLUMN pr_api_url text;
UPDATE sop_suggestions s SET pr_repository = c.owner || '/' || c.repo, pr_api_url = c.api_url
  FROM sop_repo_connections c
 WHERE c.workspace = s.workspace AND s.pr_number IS NOT NULL AND s.pr_repository IS NULL;
