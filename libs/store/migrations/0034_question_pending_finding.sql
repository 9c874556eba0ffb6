-- The finding a question task's answer raised, if any: the task is counted as waiting
-- (questions_pending) until that finding is stored too (the review service stores it as it
-- comes off the findings topic, after the task's result is recorded), so a run page that stops
-- following at 0 has its question findings. Bounded (QuestionsRepo.pending): a finding the store
-- set aside does not keep its task waiting for ever.
ALTER TABLE question_pending ADD COLUMN IF NOT EXISTS finding_id text;
