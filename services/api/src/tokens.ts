/** Dependency-injection tokens: what createApi() hands to the Nest module. */
export const REVIEW_QUERIES = Symbol('ReviewQueries');
export const RESOLVE_KEY = Symbol('ResolveKey');

/** The project an API key opens, or null for an unknown key. */
export type ResolveKey = (key: string) => Promise<string | null> | string | null;

export const MODEL_STATS = Symbol('ModelStats');

/**
 * Agreement between the LLM and the fast classifier per question (Settings -> Models): the
 * question service's, in-process embedded or over gRPC distributed, for every question it
 * answered (the api keeps those of the key's project). Absent: not served.
 */
export type ModelStats = (checkId?: string) => Promise<Array<{ check_id: string }>>;
