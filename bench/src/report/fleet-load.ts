/** Sentences the reports of fleet benchmarks (rollback, autopilot) share: their workers and their load. */
import type { WorkerGroup } from '../fleet/headroom-fleet';
import type { PhaseResult } from '../load/protocol';

/** "2 baseline (max parallelism 8) and 2 candidate (max parallelism 8)" */
export function describeWorkerGroups(groups: readonly WorkerGroup[]): string {
  return groups.map((group) => `${group.count} ${group.cluster} (max parallelism ${group.maxParallelismPerWorker})`).join(' and ');
}

/** "Load: 900 of 910 tasks succeeded (40/s), 10 failed (CODE 10), 0 dropped; p50 .. ms, p99 .. ms." */
export function describeLoad(load: Pick<PhaseResult, 'calls' | 'succeeded' | 'errorsByCode' | 'dropped' | 'tasksPerSecond' | 'latency'>): string {
  const failed = Object.values(load.errorsByCode).reduce((sum, n) => sum + n, 0);
  const errors = Object.entries(load.errorsByCode).map(([code, n]) => `${code} ${n}`);
  return `Load: ${load.succeeded} of ${load.calls} tasks succeeded (${Math.round(load.tasksPerSecond)}/s), ${failed} failed${errors.length > 0 ? ` (${errors.join(', ')})` : ''}, ${load.dropped} dropped; p50 ${load.latency.p50Ms.toFixed(1)} ms, p99 ${load.latency.p99Ms.toFixed(1)} ms.`;
}
