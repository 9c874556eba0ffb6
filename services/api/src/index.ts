export { createApi, apiUrl, ApiModule, type ApiOptions } from './api';
export { ApiError, ErrorsFilter } from './errors';
export { apiKeyOf, ApiKeyGuard } from './auth.guard';
export { REVIEW_QUERIES, RESOLVE_KEY, MODEL_STATS, type ResolveKey, type ModelStats } from './tokens';
export { ReviewGrpcClient } from './review-client';
export { apiModule, type ApiConfig } from './module';
export { SopGrpcClient } from './sop-client';
export { AuthoringError, type Author, type Authoring, type CheckSubmission, type CheckProblem, type ListedCheck, type SavedCheck, type DraftResult, type PreviewOptions, type PreviewResult, type PreviewRun } from './authoring';
export { MAX_PREVIEW_RUNS, MAX_PREVIEW_MODEL_CALLS } from './checks.controller';
