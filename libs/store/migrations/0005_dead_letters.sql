-- Items set aside because they could not be stored or handled (docs/operations.md,
-- "Dead letters"): a span the database refused, a bus message whose handler kept throwing.
-- Everything else around them was stored; each is kept here with its reason, listed per
-- project by GET /v1/projects/{project}/dead-letters.
CREATE TABLE dead_letters (
  -- sha256 of source, project and payload: the same item set aside again (a redelivered
  -- batch) is one row, seen twice
  id          text PRIMARY KEY,
  project     text NOT NULL,
  -- where it was set aside: store.events, store.findings, store.deliveries, or bus:<topic>/<group>
  source      text NOT NULL,
  -- span, run_start, run_end, finding, delivery, or message
  kind        text NOT NULL,
  run_id      text,
  -- the span id, finding id, ...
  item_id     text,
  reason      text NOT NULL,
  -- the item as JSON text: text, not jsonb, so that what the database refused as JSON is kept
  payload     text NOT NULL,
  -- the payload was cut (to its first 64 Ki characters)
  truncated   boolean NOT NULL DEFAULT false,
  times       integer NOT NULL DEFAULT 1,
  -- whole milliseconds, as the API's cursors carry them
  created_at  timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  last_at     timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);
CREATE INDEX dead_letters_newest ON dead_letters (project, created_at DESC, id DESC);
