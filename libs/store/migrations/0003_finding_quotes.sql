-- Question findings: what the run page shows beside the finding (the neatroots seed:
-- the second look's quote, and "Very likely (LLM judgment)" instead of a percentage).
ALTER TABLE findings ADD COLUMN IF NOT EXISTS quote text;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS probability double precision;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS confidence text;
ALTER TABLE findings ADD COLUMN IF NOT EXISTS answered_by text;
