-- A tool call traced at several layers (the agent framework's tool span, the MCP client's and
-- the MCP server's under it: a `tool` or `mcp_tool` span whose parent is a tool span of the same
-- tool) is one call in a run's span_count and error_count, as the checks count it. layer_count
-- is how many such links the run's stored spans hold (each one a span that is not another call:
-- the API's span_count is the column less layer_count), layer_error_count the links between two failed
-- spans (error_count less those). Both move with every span written (RunsRepo WRITE_SPANS); a
-- replaced tool span marks its run layers_recount and the same transaction counts them again.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS layer_count bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS layer_error_count bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS layers_recount boolean NOT NULL DEFAULT false;

-- A tool span's children of its run, looked up when it arrives after them (only tool spans pay for it).
CREATE INDEX IF NOT EXISTS spans_tool_parent ON spans (project, run_id, (payload->>'parent_id'))
  WHERE payload->>'type' IN ('tool', 'mcp_tool');

-- Runs stored before: their links counted once.
UPDATE runs r SET layer_count = l.n, layer_error_count = l.e
FROM (
  SELECT c.project, c.run_id, count(*) AS n, count(*) FILTER (WHERE c.is_error AND p.is_error) AS e
  FROM spans c JOIN spans p ON p.project = c.project AND p.run_id = c.run_id AND p.span_id = c.payload->>'parent_id'
  WHERE c.payload->>'type' IN ('tool', 'mcp_tool') AND p.payload->>'type' IN ('tool', 'mcp_tool')
    AND c.payload->>'tool' = p.payload->>'tool' AND c.span_id <> p.span_id
  GROUP BY c.project, c.run_id
) l
WHERE r.project = l.project AND r.run_id = l.run_id;
