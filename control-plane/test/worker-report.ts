import type { WorkerReport } from '@headroom/fleet';

/** A candidate worker's report well within every worker gate, with `overrides`. */
export const workerReport = (overrides: Partial<WorkerReport> = {}): WorkerReport => ({
  atUnixMs: 0,
  heapUsedBytes: 100,
  heapLimitBytes: 1000,
  gcTimeRatio: 0.01,
  eventLoopUtilization: 0.2,
  eventLoopDelayP99Ms: 20,
  latencyP50Ms: null,
  latencyP99Ms: null,
  tasksPerSecond: 1,
  errorsPerSecond: 0,
  ...overrides,
});
