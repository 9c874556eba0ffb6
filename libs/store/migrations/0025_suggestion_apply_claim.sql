-- One apply at a time per suggestion: apply claims the proposed row (apply_claim, a random
-- token, and when) under a conditional update before it calls GitHub, so a second apply (two
-- reviewers, or a client retrying after its deadline while GitHub is slow) gets 409 instead
-- of opening a second pull request. A claim older than the suggestions service's lapse (an
-- apply that crashed) no longer holds.
ALTER TABLE sop_suggestions ADD COLUMN apply_claim text, ADD COLUMN apply_claimed_at timestamptz;
