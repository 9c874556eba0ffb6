export { createAuthoring, DEFAULT_MAX_AGENT_CHECKS, MAX_PREVIEWS_AT_ONCE, type AuthoringDeps } from './authoring';
export { previewCheck, runItems, CallBudget, DEFAULT_PREVIEW_RUNS, DEFAULT_PREVIEW_MODEL_CALLS, MAX_PREVIEW_SPANS } from './preview';
export { parseSubmission, withAction, withProject } from './submission';
