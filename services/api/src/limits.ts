/** How far a check preview may go (the REST endpoint and the MCP tool alike). */
export const MAX_PREVIEW_RUNS = 100;
export const MAX_PREVIEW_MODEL_CALLS = 200;
/**
 * The wall-clock bound of a preview through the MCP tool: the MCP clients give up on a call
 * after 60 s by default, so past this the preview answers with what it covered, the rest listed
 * as not checked, rather than an answer nobody waits for.
 */
export const MCP_PREVIEW_MS = 45_000;
/**
 * The most wall-clock time a REST preview may be given (`time_ms`): below the 5 minutes the CLI
 * (`neatroots checks preview`) waits for its answer. Without one it has 120 s
 * (DEFAULT_PREVIEW_MS in neatroots' authoring).
 */
export const MAX_PREVIEW_MS = 240_000;
