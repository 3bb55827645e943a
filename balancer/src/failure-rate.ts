import type { DispatchOutcome } from './worker-channels';

/**
 * Which answers count for ejection by failure rate. The codes are the worker's (worker/src/errors.ts)
 * and the handlers' own; the balancer reads them from the answer and never from message text.
 */
const notCountedErrorCodes: ReadonlySet<string> = new Set([
  // The clock or the client ended these, not the worker: a slow upstream shows as deadlines everywhere.
  'HR_ERR_DEADLINE_EXCEEDED',
  'HR_ERR_CANCELLED',
  // The worker is going away; its drain, not a fault, ended the task.
  'HR_ERR_WORKER_STOPPED',
]);

/** Refusals (the task did not start) that say the worker cannot run the integration its peers run. */
const failingRefusalCodes: ReadonlySet<string> = new Set(['HR_ERR_NO_HANDLER']);

/**
 * Whether a dispatch's outcome counts as a failure (true), a success (false), or not at all
 * (undefined). Every error a handler answers counts, upstream errors too: the comparison with
 * the worker's peers on the same integration is what keeps an upstream outage from ejecting
 * anyone (it fails on every worker alike). Refusals for lack of room (full, draining) do not
 * count, nor deadlines and cancels.
 */
export function countsAsFailure(outcome: DispatchOutcome): boolean | undefined {
  switch (outcome.kind) {
    case 'done': {
      const code = outcome.response.error?.code;
      if (code === undefined) return false;
      return notCountedErrorCodes.has(code) ? undefined : true;
    }
    case 'not-started':
      return !outcome.unreachable && failingRefusalCodes.has(outcome.code) ? true : undefined;
    case 'lost':
      // Started and then the connection broke: the worker died under the task (a crash loop fails fast too).
      return true;
    case 'cancelled':
    case 'deadline':
      return undefined;
  }
}

export interface FailureRateOptions {
  /** How far back a worker's tasks count. */
  windowMs: number;
  /** Tasks of one integration a worker must have in the window, and its peers together, before it is judged; 0 never judges. */
  minTasks: number;
  /** A worker is an outlier when its failure share on an integration is at least this far above its peers' (0..1). */
  shareAbovePeers: number;
}

/** What one recorded outcome says of its worker, on the outcome's integration. */
export type FailureVerdict =
  /** Too few tasks, of the worker or of its peers, to tell. */
  | { kind: 'unknown' }
  /** Enough tasks, and its failure share is not far above its peers'. */
  | { kind: 'in-line' }
  | { kind: 'outlier'; integration: string; tasks: number; failures: number; peerTasks: number; peerFailures: number };

/** Buckets a window is cut into: the window slides by one bucket (a tenth of it) at a time. */
const bucketsPerWindow = 10;

/** Tasks and failures per time bucket, over the last window (a ring of buckets). */
class WindowCounts {
  private readonly bucketIds = new Array<number>(bucketsPerWindow).fill(-1);
  private readonly taskCounts = new Array<number>(bucketsPerWindow).fill(0);
  private readonly failureCounts = new Array<number>(bucketsPerWindow).fill(0);
  lastBucket = -1;

  add(bucket: number, tasks: number, failures: number): void {
    const at = bucket % bucketsPerWindow;
    if (this.bucketIds[at] !== bucket) {
      this.bucketIds[at] = bucket;
      this.taskCounts[at] = 0;
      this.failureCounts[at] = 0;
    }
    this.taskCounts[at]! += tasks;
    this.failureCounts[at]! += failures;
    if (bucket > this.lastBucket) this.lastBucket = bucket;
  }

  /** Takes `other`'s counts out of these, bucket by bucket (a worker leaving its integration's totals). */
  subtract(other: WindowCounts): void {
    for (let at = 0; at < bucketsPerWindow; at++) {
      if (other.bucketIds[at] === this.bucketIds[at]) {
        this.taskCounts[at]! -= other.taskCounts[at]!;
        this.failureCounts[at]! -= other.failureCounts[at]!;
      }
    }
  }

  sum(nowBucket: number): { tasks: number; failures: number } {
    let tasks = 0;
    let failures = 0;
    for (let at = 0; at < bucketsPerWindow; at++) {
      if (this.bucketIds[at]! > nowBucket - bucketsPerWindow) {
        tasks += this.taskCounts[at]!;
        failures += this.failureCounts[at]!;
      }
    }
    return { tasks, failures };
  }

  isStale(nowBucket: number): boolean {
    return this.lastBucket <= nowBucket - bucketsPerWindow;
  }
}

/** One integration of one cluster: every worker's counts and their sum. */
interface IntegrationCounts {
  readonly cluster: string;
  readonly total: WindowCounts;
  readonly byWorker: Map<string, WindowCounts>;
}

/** Series (integrations of a cluster, and workers within them) followed at once; outcomes of more are not counted (see `untracked`). */
export const maxFailureSeries = 50_000;

/**
 * Each worker's task failures per integration over a sliding window, set against its peers' on
 * the same integration: Envoy's failure-percentage outlier detection, with a threshold relative
 * to the cluster rather than fixed, so that an upstream that fails for every worker (an outage)
 * makes no one an outlier, while a worker that fails what its peers run (a bad deploy) is one.
 * Pure: the caller passes the clock; nothing here calls out.
 */
export class FailureRate {
  private readonly byIntegration = new Map<string, IntegrationCounts>();
  private seriesCount = 0;
  private untrackedCount = 0;
  private lastSweepBucket = 0;
  private readonly bucketMs: number;

  constructor(private readonly options: FailureRateOptions) {
    this.bucketMs = Math.max(1, options.windowMs / bucketsPerWindow);
  }

  /** Series followed now (bounded by maxFailureSeries). */
  get series(): number {
    return this.seriesCount;
  }

  /** Outcomes not counted since start because maxFailureSeries were followed. */
  get untracked(): number {
    return this.untrackedCount;
  }

  /**
   * Counts one outcome and says what it makes of the worker on that integration. A worker `onProbation`
   * (back from an ejection for failing) is judged on half the minimum of its own tasks: it is
   * the freest worker when it returns, so least-loaded sends it nearly every task until judged.
   */
  record(cluster: string, workerId: string, integration: string, failed: boolean, nowMs: number, onProbation = false): FailureVerdict {
    if (this.options.minTasks === 0) return { kind: 'unknown' };
    const bucket = Math.floor(nowMs / this.bucketMs);
    if (bucket - this.lastSweepBucket >= bucketsPerWindow) this.sweep(bucket);
    const counts = this.countsOf(cluster, workerId, integration);
    if (!counts) {
      this.untrackedCount++;
      return { kind: 'unknown' };
    }
    counts.worker.add(bucket, 1, failed ? 1 : 0);
    counts.integration.total.add(bucket, 1, failed ? 1 : 0);
    const minWorkerTasks = onProbation ? Math.ceil(this.options.minTasks / 2) : this.options.minTasks;
    return this.judge(counts.worker.sum(bucket), counts.integration.total.sum(bucket), integration, minWorkerTasks);
  }

  /** Drops a worker's counts (it was ejected, or left): when it comes back it is judged on what it does then. */
  forgetWorker(cluster: string, workerId: string): void {
    for (const [key, integration] of this.byIntegration) {
      if (integration.cluster !== cluster) continue;
      const counts = integration.byWorker.get(workerId);
      if (!counts) continue;
      integration.total.subtract(counts);
      integration.byWorker.delete(workerId);
      this.seriesCount--;
      if (integration.byWorker.size === 0) this.dropIntegration(key);
    }
  }

  private judge(
    worker: { tasks: number; failures: number },
    all: { tasks: number; failures: number },
    integration: string,
    minWorkerTasks: number,
  ): FailureVerdict {
    const { minTasks, shareAbovePeers } = this.options;
    const peerTasks = all.tasks - worker.tasks;
    const peerFailures = all.failures - worker.failures;
    // Envoy's minimum request volume, on both sides: without peers' tasks an outage and a bad worker look alike.
    if (worker.tasks < minWorkerTasks || peerTasks < minTasks) return { kind: 'unknown' };
    const aboveShare = worker.failures / worker.tasks - peerFailures / peerTasks;
    if (aboveShare < shareAbovePeers) return { kind: 'in-line' };
    return { kind: 'outlier', integration, tasks: worker.tasks, failures: worker.failures, peerTasks, peerFailures };
  }

  private countsOf(cluster: string, workerId: string, integration: string): { worker: WindowCounts; integration: IntegrationCounts } | undefined {
    const key = `${cluster}\u0000${integration}`;
    let counts = this.byIntegration.get(key);
    if (!counts) {
      // An integration costs a series for its total and one for its first worker.
      if (this.seriesCount + 2 > maxFailureSeries) return undefined;
      counts = { cluster, total: new WindowCounts(), byWorker: new Map() };
      this.byIntegration.set(key, counts);
      this.seriesCount++;
    }
    let worker = counts.byWorker.get(workerId);
    if (!worker) {
      if (this.seriesCount + 1 > maxFailureSeries) return undefined;
      worker = new WindowCounts();
      counts.byWorker.set(workerId, worker);
      this.seriesCount++;
    }
    return { worker, integration: counts };
  }

  /** Drops series with nothing in the window: the maps hold only what was seen lately. */
  private sweep(nowBucket: number): void {
    this.lastSweepBucket = nowBucket;
    for (const [key, integration] of this.byIntegration) {
      for (const [workerId, counts] of integration.byWorker) {
        if (!counts.isStale(nowBucket)) continue;
        integration.total.subtract(counts);
        integration.byWorker.delete(workerId);
        this.seriesCount--;
      }
      if (integration.byWorker.size === 0) this.dropIntegration(key);
    }
  }

  private dropIntegration(key: string): void {
    if (this.byIntegration.delete(key)) this.seriesCount--;
  }
}
