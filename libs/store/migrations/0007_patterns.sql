-- Patterns, verdicts and overrides (the review side of sopops). Every finding on one rule, in
-- every wording it has had, is in one rule pattern keyed by (workspace, procedure, lineage id).
-- Failure modes (kind sub, and other for findings that fit none) split a rule pattern once the
-- reasoning model clusters it: the columns are here (parent_id, clustered_at, retired_at,
-- materially_reclustered_at), the clustering is not built yet.
CREATE TABLE sop_patterns (
  id              text PRIMARY KEY,
  workspace       text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  procedure_id    text NOT NULL,
  -- the rule pattern's key: the id of the rule's first wording (its own id until lineage is stored)
  lineage_id      text NOT NULL,
  kind            text NOT NULL CHECK (kind IN ('rule', 'sub', 'other')),
  parent_id       text REFERENCES sop_patterns (id) ON DELETE CASCADE,
  name            text NOT NULL,
  -- rule_text: named from the rule's text without a model (sopops patterns rename finds these)
  named_by        text NOT NULL CHECK (named_by IN ('rule_text', 'model')),
  -- a failure mode's description (a rule pattern's is its rule's current wording)
  description     text,
  -- the rule as sessions ran it most recently (its lineage's current wording), and when
  procedure_name  text NOT NULL,
  rule_id         text NOT NULL,
  rule_kind       text NOT NULL CHECK (rule_kind IN ('step', 'never', 'warning')),
  rule_index      integer NOT NULL,
  rule_text       text NOT NULL,
  rule_ran_at     timestamptz NOT NULL,
  -- when the current wording replaced an earlier one (null: the rule's first wording)
  reworded_at     timestamptz,
  -- the last recluster that kept less than half of its findings
  materially_reclustered_at timestamptz,
  theme_id        text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  clustered_at    timestamptz,
  retired_at      timestamptz,
  CHECK ((kind = 'rule') = (parent_id IS NULL))
);
CREATE UNIQUE INDEX sop_patterns_rule ON sop_patterns (workspace, procedure_id, lineage_id) WHERE kind = 'rule';
CREATE INDEX sop_patterns_parent ON sop_patterns (parent_id) WHERE parent_id IS NOT NULL;
CREATE INDEX sop_patterns_unnamed ON sop_patterns (workspace) WHERE named_by = 'rule_text';

-- A finding's most specific pattern, its rule pattern, and whether a verdict or override
-- suppressed it (kept, flagged, left out of every count). Written by the sopops_patterns job
-- after each check; a re-check inserts its findings again with none, and the job assigns them.
ALTER TABLE sop_findings
  ADD COLUMN pattern_id text REFERENCES sop_patterns (id) ON DELETE SET NULL,
  ADD COLUMN rule_pattern_id text REFERENCES sop_patterns (id) ON DELETE SET NULL,
  ADD COLUMN suppressed boolean NOT NULL DEFAULT false;
CREATE INDEX sop_findings_unassigned ON sop_findings (workspace, created_at) WHERE pattern_id IS NULL;
CREATE INDEX sop_findings_pattern ON sop_findings (pattern_id, created_at DESC);
CREATE INDEX sop_findings_rule_pattern ON sop_findings (rule_pattern_id, created_at DESC);
-- Insights and the patterns list count findings in a window of when their session happened.
CREATE INDEX sop_findings_window ON sop_findings (workspace, (COALESCE(started_at, created_at))) INCLUDE (rule_pattern_id, pattern_id, suppressed, session_id);
CREATE INDEX sop_sessions_window ON sop_sessions (workspace, (COALESCE(started_at, received_at))) INCLUDE (status, result);

-- Verdicts: appended, never edited. The latest is the pattern's verdict, the rest its history.
CREATE TABLE sop_verdicts (
  seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace     text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  pattern_id    text NOT NULL REFERENCES sop_patterns (id) ON DELETE CASCADE,
  verdict       text NOT NULL CHECK (verdict IN ('real', 'acceptable', 'sop_wrong', 'checker_wrong')),
  note          text,
  reviewer      text,
  -- carried over by a recluster from a retired failure mode, not confirmed since
  carried_over  boolean NOT NULL DEFAULT false,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX sop_verdicts_pattern ON sop_verdicts (pattern_id, created_at DESC, seq DESC);

-- Overrides: whether the checker got one finding right, kept by session and rule (not by
-- finding row), so they outlive a re-check of the session.
CREATE TABLE sop_overrides (
  session_id    text NOT NULL REFERENCES sop_sessions (id) ON DELETE CASCADE,
  procedure_id  text NOT NULL,
  rule_id       text NOT NULL,
  workspace     text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  correct       boolean NOT NULL,
  note          text,
  reviewer      text,
  created_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (session_id, procedure_id, rule_id)
);
