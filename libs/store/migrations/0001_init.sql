-- neatroots store, first schema. Runs, spans and findings as the review service records them
-- (the neatroots seed: Findings), projects and their API keys, per-check dismissal statistics,
-- and the checks kept in the database (the fourth check source).
-- Times are timestamptz; the repositories pass and read them as ISO-8601 strings / Dates.

CREATE TABLE projects (
  name        text PRIMARY KEY,
  -- halts act only with steering on for the project (the seed: action: halt)
  steering    boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  -- sha256 (hex) of the key: the key itself is shown once and never stored
  key_hash    text PRIMARY KEY,
  project     text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
  label       text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX api_keys_project ON api_keys (project);

CREATE TABLE runs (
  project       text NOT NULL,
  run_id        text NOT NULL,
  workflow      text,
  session_id    text,
  -- run_start's ts_ms, else the earliest span start, else when the first item was received
  started_at    timestamptz NOT NULL,
  ended_at      timestamptz,
  end_status    text,
  final_output  jsonb,
  -- the run_start event as given (system prompt, first user message, tools): the planner reads it
  run_start     jsonb,
  -- recomputed from spans after each write, so a re-exported span is never counted twice
  span_count    integer NOT NULL DEFAULT 0,
  error_count   integer NOT NULL DEFAULT 0,
  total_tokens  bigint NOT NULL DEFAULT 0,
  last_seen_at  timestamptz NOT NULL,
  PRIMARY KEY (project, run_id)
);
CREATE INDEX runs_newest ON runs (project, started_at DESC, run_id DESC);
CREATE INDEX runs_workflow_newest ON runs (project, workflow, started_at DESC, run_id DESC);

CREATE TABLE spans (
  project       text NOT NULL,
  run_id        text NOT NULL,
  span_id       text NOT NULL,
  -- the span in the contract's JSON shape (CONTRACTS.md section 1)
  payload       json NOT NULL,
  start_ms      bigint,
  -- kept beside the payload so the run's counters are sums over columns, not over JSON
  is_error      boolean NOT NULL DEFAULT false,
  total_tokens  bigint NOT NULL DEFAULT 0,
  received_at   timestamptz NOT NULL,
  -- a re-exported span (same run_id and span_id) replaces the earlier copy
  PRIMARY KEY (project, run_id, span_id)
);

CREATE TABLE findings (
  -- deterministic, from the rule engine: a redelivered event finds its row
  id               text PRIMARY KEY,
  project          text NOT NULL,
  run_id           text NOT NULL,
  workflow         text,
  check_id         text NOT NULL,
  -- library, user, project or database; not a CHECK constraint: a value this version does not
  -- know must not make a findings batch fail forever
  check_source     text NOT NULL,
  kind             text NOT NULL,
  title            text NOT NULL,
  guidance         text NOT NULL DEFAULT '',
  action           text NOT NULL,
  halt_suppressed  boolean NOT NULL DEFAULT false,
  group_name       text,
  -- higher heads its group in a run (the most specific check)
  priority         double precision NOT NULL DEFAULT 0,
  span_ids         jsonb NOT NULL DEFAULT '[]',
  count            integer NOT NULL DEFAULT 1,
  status           text NOT NULL CHECK (status IN ('open', 'resolved')),
  -- raised while its check was quiet in the project (dismissed 3 times there): recorded on
  -- the run page, but it does not count, send notes or show in the default lists
  quiet            boolean NOT NULL DEFAULT false,
  raised_at        timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  resolved_at      timestamptz,
  -- when a note about it reached the agent
  active_at        timestamptz,
  dismissed_at     timestamptz,
  dismissed_by     text,
  dismiss_note     text
);
CREATE INDEX findings_run ON findings (project, run_id);
CREATE INDEX findings_newest ON findings (project, raised_at DESC, id DESC);
CREATE INDEX findings_check ON findings (project, check_id);

-- Notes that reached an agent. Kept apart from findings because the deliveries and findings
-- topics are read by separate consumers: a delivery may be stored before its finding, which
-- then takes its active_at from here when it is inserted.
CREATE TABLE note_deliveries (
  finding_id    text PRIMARY KEY,
  project       text NOT NULL,
  note_id       text,
  delivered_at  timestamptz NOT NULL
);

CREATE TABLE check_stats (
  project     text NOT NULL,
  check_id    text NOT NULL,
  -- findings that count toward precision: those raised while the check was not quiet,
  -- and quiet ones a person nevertheless dismissed
  findings    integer NOT NULL DEFAULT 0 CHECK (findings >= 0),
  -- findings dismissed now; reopening one takes it back (3 or more: the check is quiet)
  dismissals  integer NOT NULL DEFAULT 0 CHECK (dismissals >= 0),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project, check_id)
);

CREATE TABLE db_checks (
  id          text PRIMARY KEY,
  -- the check as YAML, validated by the check loader like any other source
  yaml        text NOT NULL,
  source      text NOT NULL DEFAULT 'database' CHECK (source = 'database'),
  -- who wrote it: planner, agent (a coding agent over MCP), app (a person in the check editor)
  origin      text NOT NULL,
  project     text,
  workflow    text,
  -- the seed keeps these "in the database until you save them": saved records that you did
  saved       boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX db_checks_project ON db_checks (project);
