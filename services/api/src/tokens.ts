/** Dependency-injection tokens: what createApi() hands to the Nest module. */
export const REVIEW_QUERIES = Symbol('ReviewQueries');
export const RESOLVE_KEY = Symbol('ResolveKey');

/** The project an API key opens, or null for an unknown key. */
export type ResolveKey = (key: string) => Promise<string | null> | string | null;
