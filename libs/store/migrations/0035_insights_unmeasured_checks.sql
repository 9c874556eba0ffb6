-- Insights leaves the findings of not_measurable checks out of its rule rates
-- (ReviewReadRepo.unmeasuredFindings): it reads the window's not_measurable checks, then their
-- findings. sop_checks_window has no session id and not the result in its key, so that read went
-- through every check of the window in the table itself, check bodies and all (4,600 pages,
-- 20,000 rows removed by the filter for none kept, in a busy week of 100 procedures of 40 rules).
-- This index holds the not_measurable checks alone, with what the join needs.
CREATE INDEX sop_checks_unmeasured ON sop_checks (workspace, at) INCLUDE (session_id, procedure_id)
  WHERE result = 'not_measurable' AND checked_result IS NOT NULL;
