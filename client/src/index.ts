export {
  createClient,
  type ClientOptions,
  type HeadroomClient,
  type SubmitRequest,
  type SubmitResult,
  type TaskPlacement,
  type TaskPriority,
  type ClientStats,
} from './client';
export * from './errors';
export { retryable, retryDelayMs, type RetryPolicy } from './retry-policy';
