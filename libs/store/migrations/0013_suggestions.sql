-- Suggestions: an edit to a pattern's procedure made by the reasoning model (SuggestEdit) from
-- a verdict. Each row is one proposal against one base file (old_text, at base_version), so its
-- history is kept as it was: a rewrite is a new row (rewrite_of / rewritten_as).
--   status   generating -> proposed | failed -> applied (draft at head) | pr_open -> merged,
--            or dismissed (by hand, "PR closed", or "Rewritten against the current text.")
-- Rule lineage reads applied rows (applied, pr_open, merged): rule_id is the rule it edited
-- (as it read at head), applied_text the file it wrote (new_text, or that merged with edits
-- made since).
CREATE TABLE sop_suggestions (
  id                   text PRIMARY KEY,
  workspace            text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  pattern_id           text NOT NULL REFERENCES sop_patterns (id) ON DELETE CASCADE,
  procedure_id         text NOT NULL,
  -- the file at head: procedures/<procedure_id>.md
  path                 text NOT NULL,
  -- the rule as it reads at head when the suggestion was asked for
  rule_id              text NOT NULL,
  rule_text            text NOT NULL,
  -- the verdict it answers (a newer verdict starts fix tracking over)
  verdict              text NOT NULL CHECK (verdict IN ('real', 'acceptable', 'sop_wrong')),
  verdict_note         text,
  verdict_at           timestamptz NOT NULL,
  status               text NOT NULL CHECK (status IN ('generating', 'proposed', 'failed', 'applied', 'pr_open', 'merged', 'dismissed')),
  prompt_version       text NOT NULL,
  model                text,
  base_version         text NOT NULL,
  old_text             text NOT NULL,
  new_text             text,
  rationale            text,
  plan                 jsonb,
  -- why it failed (generation), or why apply could not open the pull request
  error                text,
  -- for a rewrite: the unified diff of the file since the old one was written, given to the model
  changes_since        text,
  rewrite_of           text REFERENCES sop_suggestions (id) ON DELETE SET NULL,
  rewritten_as         text REFERENCES sop_suggestions (id) ON DELETE SET NULL,
  -- what apply wrote, and the head version it was merged into (null when written as is)
  applied_text         text,
  merged_into_version  text,
  pr_url               text,
  pr_number            integer,
  pr_branch            text,
  merge_commit_sha     text,
  -- when the pull request was last looked at on GitHub (reads look at most once a minute)
  pr_checked_at        timestamptz,
  note                 text,
  reviewer             text,
  created_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
  applied_at           timestamptz,
  pr_opened_at         timestamptz,
  merged_at            timestamptz,
  dismissed_at         timestamptz
);
CREATE INDEX sop_suggestions_list ON sop_suggestions (workspace, created_at DESC, id DESC);
CREATE INDEX sop_suggestions_pattern ON sop_suggestions (pattern_id, created_at DESC);
CREATE INDEX sop_suggestions_open_prs ON sop_suggestions (workspace) WHERE status = 'pr_open';
