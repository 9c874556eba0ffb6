-- The run page lists a run's spans in the order they happened. start_ms was stored rounded to
-- the millisecond and ties were broken by span id, so a fast run's spans (several in one
-- millisecond, often) listed out of order. Kept now: the start as given, to the fraction of a
-- millisecond, and the order spans arrived in (a sequence), which breaks the remaining ties.
-- The run's spans are paged in that order (keyset: the index below).

ALTER TABLE spans ADD COLUMN IF NOT EXISTS start_exact double precision;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS arrival bigint;
CREATE SEQUENCE IF NOT EXISTS spans_arrival OWNED BY spans.arrival;

-- Spans stored before: their exact start from the span itself, their arrival in the order
-- they were received (the closest this version can tell).
UPDATE spans SET start_exact = (payload->>'start_ms')::double precision
WHERE json_typeof(payload->'start_ms') = 'number';

UPDATE spans s SET arrival = o.n
FROM (
  SELECT project, run_id, span_id,
         row_number() OVER (ORDER BY received_at, project, run_id, start_ms NULLS LAST, span_id) AS n
  FROM spans
) o
WHERE s.project = o.project AND s.run_id = o.run_id AND s.span_id = o.span_id;

SELECT setval('spans_arrival', COALESCE((SELECT max(arrival) FROM spans), 0) + 1, false);
ALTER TABLE spans ALTER COLUMN arrival SET DEFAULT nextval('spans_arrival');
ALTER TABLE spans ALTER COLUMN arrival SET NOT NULL;

-- Spans without a start come last: 'Infinity' sorts after every number. The queries use
-- this exact expression, so they read the index in order and a page costs its own size.
CREATE INDEX IF NOT EXISTS spans_order ON spans (project, run_id, (COALESCE(start_exact, 'Infinity'::double precision)), arrival);
