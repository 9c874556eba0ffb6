export { createApi, apiUrl, ApiModule, type ApiOptions } from './api';
export { ApiError, ErrorsFilter } from './errors';
export { apiKeyOf, ApiKeyGuard } from './auth.guard';
export { REVIEW_QUERIES, RESOLVE_KEY, type ResolveKey } from './tokens';
export { ReviewGrpcClient } from './review-client';
