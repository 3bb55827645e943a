import type { DispatchOutcome } from './worker-channels';

/**
 * Which answers count for ejection by failure rate. The codes are the worker's (worker/src/errors.ts)
 * and the handlers' own; the balancer reads them from the answer and never from message text.
 */
const notCountedErrorCodes: ReadonlySet<string> = new Set([
  // The client ended it, not the worker.
  'HR_ERR_CANCELLED',
  // The worker is going away; its drain, not a fault, ended the task.
  'HR_ERR_WORKER_STOPPED',
]);

/** Refusals (the task did not start) that say the worker cannot run the integration its peers run. */
const failingRefusalCodes: ReadonlySet<string> = new Set(['HR_ERR_NO_HANDLER']);

/**
 * What a dispatch's outcome says of the worker: it failed the task, ran it, ran out of time on it,
 * or nothing (undefined). Every error a handler answers is a failure, upstream errors too: the
 * comparison with the worker's peers on the same integration is what keeps an upstream outage
 * from ejecting anyone (it fails on every worker alike). A deadline is no failure (a slow upstream
 * shows as deadlines everywhere), but no success either: see FailureRate's judge. Refusals for
 * lack of room (full, draining) and cancels say nothing.
 */
export type TaskJudgement = 'failure' | 'success' | 'timeout';

export function judgeOutcome(outcome: DispatchOutcome): TaskJudgement | undefined {
  switch (outcome.kind) {
    case 'done': {
      const code = outcome.response.error?.code;
      if (code === undefined) return 'success';
      if (code === 'HR_ERR_DEADLINE_EXCEEDED') return 'timeout';
      return notCountedErrorCodes.has(code) ? undefined : 'failure';
    }
    case 'not-started':
      return !outcome.unreachable && failingRefusalCodes.has(outcome.code) ? 'failure' : undefined;
    case 'lost':
      // Started and then the connection broke: the worker died under the task (a crash loop fails fast too).
      return 'failure';
    case 'deadline':
      // Only a task the worker had started says something of it; one that never left the balancer does not.
      return outcome.started ? 'timeout' : undefined;
    case 'cancelled':
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

/** Over a window: tasks that ended with an answer (failed or not), failed ones, and those that ran out of time. */
interface WindowSum {
  tasks: number;
  failures: number;
  timeouts: number;
}

/** Tasks, failures and timeouts per time bucket, over the last window (a ring of buckets). */
class WindowCounts {
  private readonly bucketIds = new Array<number>(bucketsPerWindow).fill(-1);
  private readonly taskCounts = new Array<number>(bucketsPerWindow).fill(0);
  private readonly failureCounts = new Array<number>(bucketsPerWindow).fill(0);
  private readonly timeoutCounts = new Array<number>(bucketsPerWindow).fill(0);
  lastBucket = -1;

  /** Counts one task: its judgement, in `bucket`. */
  add(bucket: number, judgement: TaskJudgement): void {
    const at = bucket % bucketsPerWindow;
    if (this.bucketIds[at] !== bucket) {
      this.bucketIds[at] = bucket;
      this.taskCounts[at] = 0;
      this.failureCounts[at] = 0;
      this.timeoutCounts[at] = 0;
    }
    if (judgement === 'timeout') this.timeoutCounts[at]!++;
    else this.taskCounts[at]!++;
    if (judgement === 'failure') this.failureCounts[at]!++;
    if (bucket > this.lastBucket) this.lastBucket = bucket;
  }

  /** Takes `other`'s counts out of these, bucket by bucket (a worker leaving its integration's totals). */
  subtract(other: WindowCounts): void {
    for (let at = 0; at < bucketsPerWindow; at++) {
      if (other.bucketIds[at] === this.bucketIds[at]) {
        this.taskCounts[at]! -= other.taskCounts[at]!;
        this.failureCounts[at]! -= other.failureCounts[at]!;
        this.timeoutCounts[at]! -= other.timeoutCounts[at]!;
      }
    }
  }

  sum(nowBucket: number): WindowSum {
    const sum = { tasks: 0, failures: 0, timeouts: 0 };
    for (let at = 0; at < bucketsPerWindow; at++) {
      if (this.bucketIds[at]! > nowBucket - bucketsPerWindow) {
        sum.tasks += this.taskCounts[at]!;
        sum.failures += this.failureCounts[at]!;
        sum.timeouts += this.timeoutCounts[at]!;
      }
    }
    return sum;
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

/** One-sided 95% confidence: the normal quantile 1.645. */
const confidenceZ = 1.645;

/** Wilson's score interval for a share of `hits` in `count` trials: [low, high]. */
function wilsonInterval(hits: number, count: number): [number, number] {
  const share = hits / count;
  const zSquared = confidenceZ * confidenceZ;
  const scale = 1 + zSquared / count;
  const centre = (share + zSquared / (2 * count)) / scale;
  const halfWidth = (confidenceZ / scale) * Math.sqrt((share * (1 - share)) / count + zSquared / (4 * count * count));
  return [centre - halfWidth, centre + halfWidth];
}

/**
 * The lower confidence bound of share A minus share B (Newcombe's hybrid score interval, from the
 * two Wilson intervals): how far above B's share A's surely is, given how few trials either has.
 */
function lowerBoundOfDifference(hitsA: number, countA: number, hitsB: number, countB: number): number {
  const [lowA] = wilsonInterval(hitsA, countA);
  const [, highB] = wilsonInterval(hitsB, countB);
  const shareA = hitsA / countA;
  const shareB = hitsB / countB;
  return shareA - shareB - Math.hypot(shareA - lowA, highB - shareB);
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
  record(cluster: string, workerId: string, integration: string, judgement: TaskJudgement, nowMs: number, onProbation = false): FailureVerdict {
    if (this.options.minTasks === 0) return { kind: 'unknown' };
    const bucket = Math.floor(nowMs / this.bucketMs);
    if (bucket - this.lastSweepBucket >= bucketsPerWindow) this.sweep(bucket);
    const counts = this.countsOf(cluster, workerId, integration);
    if (!counts) {
      this.untrackedCount++;
      return { kind: 'unknown' };
    }
    counts.worker.add(bucket, judgement);
    counts.integration.total.add(bucket, judgement);
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

  /**
   * An outlier fails far more of its answered tasks than its peers, and its peers also get far
   * more of theirs done. The second half matters when the peers' tasks run out of time: a
   * deadline is no failure, so peers whose outage tasks hang until their deadline keep only
   * their older successes in the failure share, and a worker whose outage tasks fail at once
   * would look far worse than them. Both differences are taken at their lower confidence bound,
   * not at their point value: at the minimum volume, chance alone makes shares differ by 0.5 (the
   * first 10 tasks of an outage on one worker against peers still counting successes from just
   * before it).
   */
  private judge(worker: WindowSum, all: WindowSum, integration: string, minWorkerTasks: number): FailureVerdict {
    const { minTasks, shareAbovePeers } = this.options;
    const peers = { tasks: all.tasks - worker.tasks, failures: all.failures - worker.failures, timeouts: all.timeouts - worker.timeouts };
    // Envoy's minimum request volume, on both sides: without peers' tasks an outage and a bad worker look alike.
    if (worker.tasks < minWorkerTasks || peers.tasks < minTasks) return { kind: 'unknown' };
    const failuresAbovePeers = lowerBoundOfDifference(worker.failures, worker.tasks, peers.failures, peers.tasks);
    const successesBelowPeers = lowerBoundOfDifference(
      peers.tasks - peers.failures,
      peers.tasks + peers.timeouts,
      worker.tasks - worker.failures,
      worker.tasks + worker.timeouts,
    );
    if (failuresAbovePeers < shareAbovePeers || successesBelowPeers < shareAbovePeers) return { kind: 'in-line' };
    return { kind: 'outlier', integration, tasks: worker.tasks, failures: worker.failures, peerTasks: peers.tasks, peerFailures: peers.failures };
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
