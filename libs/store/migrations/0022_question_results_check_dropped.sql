-- question_results by check and time: no query reads it (the run page and span retention read
-- a run's results, by question_results_run), and every stored answer paid for its entry. A
-- question is asked about most tool calls, so this table is written almost as often as spans.
DROP INDEX IF EXISTS question_results_check;
