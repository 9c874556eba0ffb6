-- SOP checks (the sopops half): a workspace's procedures at head, its numbered releases, the
-- sessions sent in (or made from runs) and what the checker found. A workspace is the sopops
-- name for a project: the same id, the same API keys.

-- The files at head, as saved through the API or `sopops push` (procedures/x.md, agents/x.yaml,
-- groups/x.yaml). version: a hash of the text, as sopc computes a procedure's version.
CREATE TABLE sop_head_files (
  workspace   text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  path        text NOT NULL,
  text        text NOT NULL,
  version     text NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace, path)
);

-- Releases, numbered from 1 per workspace; one is live. lock: what `sopc export` writes for
-- the release's files (procedures with their rules, agents with their procedures).
CREATE TABLE sop_releases (
  id          text PRIMARY KEY,
  workspace   text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  number      integer NOT NULL CHECK (number >= 1),
  live        boolean NOT NULL DEFAULT false,
  lock        jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace, number)
);
-- at most one live release per workspace
CREATE UNIQUE INDEX sop_releases_live ON sop_releases (workspace) WHERE live;

-- The files of each release, as they were published (the base of diffs and merges).
CREATE TABLE sop_release_files (
  release_id  text NOT NULL REFERENCES sop_releases (id) ON DELETE CASCADE,
  path        text NOT NULL,
  text        text NOT NULL,
  version     text NOT NULL,
  PRIMARY KEY (release_id, path)
);

-- Sessions: one per (workspace, external_id). content_hash makes re-sent content a no-op;
-- new content replaces the session's results. status: queued until checked, then checked.
CREATE TABLE sop_sessions (
  id              text PRIMARY KEY,
  workspace       text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  external_id     text NOT NULL,
  agent           text NOT NULL,
  -- the release asked for (null: the live one when it is checked) and the one it was checked on
  release_asked   text,
  release_id      text REFERENCES sop_releases (id),
  started_at      timestamptz,
  transcript_ref  text,
  content_hash    text NOT NULL,
  body            jsonb NOT NULL,
  status          text NOT NULL CHECK (status IN ('queued', 'checked', 'failed')),
  error           text,
  -- the session's result: the worst of its checks' (rolled up with suppressed rules as passed)
  result          text CHECK (result IN ('deviated', 'partial', 'followed', 'not_measurable')),
  checked_result  text CHECK (checked_result IN ('deviated', 'partial', 'followed', 'not_measurable')),
  -- the neatroots run it was made from, if any
  run_id          text,
  received_at     timestamptz NOT NULL DEFAULT now(),
  checked_at      timestamptz,
  UNIQUE (workspace, external_id)
);
CREATE INDEX sop_sessions_list ON sop_sessions (workspace, received_at DESC, id DESC);
CREATE INDEX sop_sessions_agent ON sop_sessions (workspace, agent, received_at DESC);

-- One row per procedure the router considered for a session: the check as the API shows it.
CREATE TABLE sop_checks (
  session_id      text NOT NULL REFERENCES sop_sessions (id) ON DELETE CASCADE,
  procedure_id    text NOT NULL,
  position        integer NOT NULL,
  result          text,
  checked_result  text,
  body            jsonb NOT NULL,
  PRIMARY KEY (session_id, procedure_id)
);
CREATE INDEX sop_checks_procedure ON sop_checks (procedure_id, session_id);

-- Findings: rule results with status skipped, violated, out_of_order or unheeded, in their
-- own table so patterns, the review queue and insights query them without unpacking checks.
-- id: deterministic from the session, procedure and rule, so a re-check replaces, never adds.
CREATE TABLE sop_findings (
  id            text PRIMARY KEY,
  workspace     text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  session_id    text NOT NULL REFERENCES sop_sessions (id) ON DELETE CASCADE,
  procedure_id  text NOT NULL,
  release_id    text,
  rule_id       text NOT NULL,
  kind          text NOT NULL CHECK (kind IN ('step', 'never', 'warning')),
  index         integer NOT NULL,
  text          text NOT NULL,
  status        text NOT NULL CHECK (status IN ('skipped', 'violated', 'out_of_order', 'unheeded')),
  evidence      jsonb NOT NULL DEFAULT '[]',
  reason        text,
  started_at    timestamptz,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sop_findings_rule ON sop_findings (workspace, rule_id, created_at DESC);
CREATE INDEX sop_findings_session ON sop_findings (session_id);
