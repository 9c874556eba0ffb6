-- A tool call traced at several layers (the agent framework's tool span, the MCP client's and
-- the MCP server's under it: a `tool` or `mcp_tool` span whose parent is a tool span of the same
-- tool) is one call in a run's span_count and error_count, as the checks count it. layer_count
-- is how many such links the run's stored spans hold (each one a span that is not another call:
-- the API's span_count is the column less layer_count), layer_error_count the links between two failed
-- spans (error_count less those). Both move with every span written (RunsRepo WRITE_SPANS); a
-- replaced tool span marks its run layers_recount and the same transaction counts them again.
-- The spans' columns they are counted from, and the links of the runs stored before: 0039.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS layer_count bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS layer_error_count bigint NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS layers_recount boolean NOT NULL DEFAULT false;
