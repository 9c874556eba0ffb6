/** Dependency-injection tokens: what createApi() hands to the Nest module. */
export const REVIEW_QUERIES = Symbol('ReviewQueries');
export const RESOLVE_KEY = Symbol('ResolveKey');

/** The project an API key opens, or null for an unknown key. */
export type ResolveKey = (key: string) => Promise<string | null> | string | null;

export const MODEL_STATS = Symbol('ModelStats');

/**
 * Agreement between the LLM and the fast classifier per question (Settings -> Models), of the
 * questions of `project` only (the question service keeps the checks that apply there):
 * in-process embedded or over gRPC distributed. Absent: not served.
 */
export type ModelStats = (project: string, checkId?: string) => Promise<unknown[]>;
