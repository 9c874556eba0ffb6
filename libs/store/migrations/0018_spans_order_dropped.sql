-- The spans_order index (0004) is dropped: every span stored paid for it, and the run page
-- it served reads as fast without it. The page keeps its order (by the exact start, spans
-- without one last, then by arrival) and its keyset cursor: it now reads the run's spans
-- through the primary key's prefix (project, run_id) and sorts them, a top-N sort whose cost
-- grows with the run: measured on a run of 10,000 spans among 110,000, the first page of 500
-- took 4 ms in Postgres (0.3 ms through the index) and 10 ms in PGlite, which did not use the
-- index at all (its planner, without statistics, sorted the run already). The write stores
-- 10-30% more spans a second without it (docs/performance.md). No data moves: the columns the
-- order reads (start_exact, arrival) stay.
DROP INDEX IF EXISTS spans_order;
