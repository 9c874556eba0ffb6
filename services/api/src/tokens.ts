import type { DisabledCheck } from '@neatroots/checks';
import type { ApiKeyGrant } from '@neatroots/store';
/** Dependency-injection tokens: what createApi() hands to the Nest module. */
export const REVIEW_QUERIES = Symbol('ReviewQueries');
export const RESOLVE_KEY = Symbol('ResolveKey');

/**
 * The project an API key opens and its scope (e.g. ProjectsRepo.resolveApiKey), or null for an
 * unknown key. The API and MCP take `api` keys only: an `ingest` key (an agent's) gets 403.
 */
export type ResolveKey = (key: string) => Promise<ApiKeyGrant | null> | ApiKeyGrant | null;

export const MODEL_STATS = Symbol('ModelStats');

export const DISABLED_CHECKS = Symbol('DisabledChecks');

/**
 * The `match` checks that run in `project` and were disabled for a slow pattern (until the
 * neatroots that disabled them restarts), each with its reason. Absent: none known.
 */
export type DisabledChecksLookup = (project: string) => readonly DisabledCheck[] | Promise<readonly DisabledCheck[]>;

/**
 * Agreement between the LLM and the fast classifier per question (Settings -> Models), of the
 * questions of `project` only (the question service keeps the checks that apply there):
 * in-process embedded or over gRPC distributed. Absent: not served.
 */
export type ModelStats = (project: string, checkId?: string) => Promise<unknown[]>;

/** The SOP side of the review service (workspaces, releases, sessions): in-process or over gRPC. */
export const SOP_QUERIES = Symbol('SopQueries');

/** The review side of sopops (patterns, verdicts, overrides, the review queue, insights): in-process or over gRPC. */
export const REVIEW_SOP_QUERIES = Symbol('ReviewSopQueries');

/** The api's logger (the service's, ServiceContext.log), for faults the API answers as internal errors; null: Nest's. */
export const API_LOG = Symbol('ApiLog');

/** The authoring side (draft, preview, save, halt: issue 14), supplied by the composition root. */
export const AUTHORING = Symbol('Authoring');
