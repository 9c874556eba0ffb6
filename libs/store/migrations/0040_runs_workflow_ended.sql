-- The review service's start queues again the ended runs a stop left without their session
-- (RunSessionsRepo): the runs of an agent that started up to a day before the workspace's newest
-- run, through runs_workflow_newest. A run longer than that which ended just before the stop was
-- left out. This index finds an agent's runs by when they ended, so the start also reads those
-- that ended within the day, however long ago they started. ended_at is written once, by the
-- run's run_end: the span writes that update a run's row keep it as it is.
CREATE INDEX IF NOT EXISTS runs_workflow_ended ON runs (project, workflow, ended_at DESC, run_id DESC) WHERE ended_at IS NOT NULL;
