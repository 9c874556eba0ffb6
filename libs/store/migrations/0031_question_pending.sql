-- The question tasks the rule engine handed to the question service, one row a task, so the run
-- page can say how many of a run's questions wait for their answer (GET runs/{id}'s
-- questions_pending): a run whose questions are not answered yet is not checked and clean.
-- A row comes when its task is handed over (not done) or when its result is recorded (done),
-- whichever is first, and is kept done: a task handed over again (redelivered, or the run's end
-- asking the same task again) stays done. Deleted with the run's spans (span retention).
CREATE TABLE IF NOT EXISTS question_pending (
  task_id text PRIMARY KEY,
  project text NOT NULL,
  run_id text NOT NULL,
  done boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS question_pending_run ON question_pending (project, run_id);
