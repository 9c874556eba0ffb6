-- A question task's row is kept done only as long as its hand-over may still be on its way (the
-- rule engine records it beside its step, the question service may answer first): then deleted
-- (QuestionsRepo.record prunes rows done more than an hour ago), so the table holds the questions
-- waiting and the last hour's answers, not a row for every task until span retention.
ALTER TABLE question_pending ADD COLUMN IF NOT EXISTS done_at timestamptz;
UPDATE question_pending SET done_at = now() WHERE done AND done_at IS NULL;
CREATE INDEX IF NOT EXISTS question_pending_done_at ON question_pending (done_at) WHERE done;
