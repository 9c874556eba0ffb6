-- The layers of a tool call (0033) are linked from two columns of a tool span, its tool and its
-- parent, written beside the payload by RunsRepo's WRITE_SPANS (NULL for any other span, and for
-- a tool span without a tool name): linking them parses no stored JSON on any span written.
-- Added without a default, so the spans stored before are not rewritten for them; their tool
-- spans are filled in once below.
ALTER TABLE spans ADD COLUMN IF NOT EXISTS call_tool text;
ALTER TABLE spans ADD COLUMN IF NOT EXISTS call_parent text;
UPDATE spans SET call_tool = payload->>'tool', call_parent = payload->>'parent_id'
  WHERE payload->>'type' IN ('tool', 'mcp_tool') AND payload->>'tool' IS NOT NULL;

-- A tool span's children of its run, looked up when it arrives after them: only tool spans with
-- a parent are in it, and deciding which costs no JSON parse on any span written.
-- (A database that applied 0033 before it moved here has its index on the JSON: dropped.)
DROP INDEX IF EXISTS spans_tool_parent;
CREATE INDEX IF NOT EXISTS spans_call_parent ON spans (project, run_id, call_parent) WHERE call_parent IS NOT NULL;

-- Runs stored before: their links counted once.
UPDATE runs r SET layer_count = l.n, layer_error_count = l.e
FROM (
  SELECT c.project, c.run_id, count(*) AS n, count(*) FILTER (WHERE c.is_error AND p.is_error) AS e
  FROM spans c JOIN spans p ON p.project = c.project AND p.run_id = c.run_id AND p.span_id = c.call_parent
  WHERE c.call_parent IS NOT NULL AND p.call_tool = c.call_tool AND c.span_id <> p.span_id
  GROUP BY c.project, c.run_id
) l
WHERE r.project = l.project AND r.run_id = l.run_id;
