-- The question service (issue 4): what the fast classifier learnt per question, how often it
-- agreed with the LLM (Settings -> Models), the planner's plan per workflow, and what each
-- question check found on a run, including the checks that could not be made ("not checked").

CREATE TABLE question_agreement (
  -- the check id and a hash of its wording: a reworded question starts afresh
  question_key  text PRIMARY KEY,
  check_id      text NOT NULL,
  answers       integer NOT NULL DEFAULT 0 CHECK (answers >= 0),
  agreed        integer NOT NULL DEFAULT 0 CHECK (agreed >= 0),
  -- the most recent outcomes, oldest first: '1' agreed, '0' did not (the routing switch reads these)
  recent        text NOT NULL DEFAULT '',
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX question_agreement_check ON question_agreement (check_id);

CREATE TABLE classifier_models (
  question_key  text PRIMARY KEY,
  check_id      text NOT NULL,
  -- LLM answers the model learnt from
  examples      integer NOT NULL DEFAULT 0,
  -- the logistic regression: biases and its non-zero hashed-feature weights (base64)
  model         jsonb NOT NULL,
  updated_at    timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE question_plans (
  project     text NOT NULL,
  workflow    text NOT NULL,
  -- the tool names planned for: a run with a tool not in here has the plan redone
  tools       jsonb NOT NULL DEFAULT '[]',
  plan        jsonb NOT NULL,
  -- decision, local (an LLM) or heuristic (no LLM, or its plan was unusable)
  planned_by  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (project, workflow)
);

CREATE TABLE question_results (
  -- the task's deterministic id: a redelivered task writes nothing new
  task_id      text PRIMARY KEY,
  project      text NOT NULL,
  run_id       text NOT NULL,
  check_id     text NOT NULL,
  -- the span judged (span scope) or 'run'
  anchor       text NOT NULL,
  span_ids     jsonb NOT NULL DEFAULT '[]',
  -- answered, or not_checked (a model error or timeout: never a pass)
  status       text NOT NULL,
  flagged      boolean NOT NULL DEFAULT false,
  probability  double precision,
  value        double precision,
  label        text,
  quote        text,
  answered_by  text,
  confidence   text,
  reason       text,
  finding_id   text,
  at           timestamptz NOT NULL
);
CREATE INDEX question_results_run ON question_results (project, run_id);
CREATE INDEX question_results_check ON question_results (project, check_id, at DESC);
