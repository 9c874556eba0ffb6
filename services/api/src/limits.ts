/** How far a check preview may go (the REST endpoint and the MCP tool alike). */
export const MAX_PREVIEW_RUNS = 100;
export const MAX_PREVIEW_MODEL_CALLS = 200;
