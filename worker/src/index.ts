export {
  cancelCountsAsDeadlineWithinMs,
  createWorker,
  workerOptionsSchema,
  workerReportTtlMs,
  type Worker,
  type WorkerOptions,
  type WorkerDependencies,
  type WorkerStats,
} from './worker';
export type { TaskContext, TaskHandler, HandlerMap } from './handler';
export { TaskFailedError, workerErrorCodes } from './errors';
export { ParallelismGate } from './gate';
export { SelfProtection, recoveryFraction, type ProtectionState, type ProtectionReason, type SelfProtectionLines } from './self-protection';
