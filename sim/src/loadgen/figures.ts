/**
 * What the load generator counts, over one report window or since it started.
 * Every map is bounded: clusters and error codes beyond the limits are counted as "other".
 */
import { LatencyHistogram, type LatencySummary } from './histogram';

export type TaskPriority = 'USER_PRESENT' | 'BACKGROUND';

const maxClusters = 16;
const maxErrorCodes = 32;
export const otherKey = 'other';

export interface ClusterFigures {
  /** Tasks that ran there and answered (with a result or a handler error). */
  completed: number;
  /** Of those, tasks whose handler failed. */
  failed: number;
  latencyMs: Record<TaskPriority, LatencySummary>;
  /** Handler errors by code. */
  errorsByCode: Record<string, number>;
}

export interface LoadFigures {
  seconds: number;
  /** Calls sent to the balancer. */
  sent: number;
  sentPerS: number;
  completed: number;
  completedPerS: number;
  /** Tasks never sent: `outstandingLimit` calls were already waiting for answers. */
  droppedOutstandingLimit: number;
  /** Tasks never sent: the process fell more than a second behind its schedule. */
  droppedBehindSchedule: number;
  /** Calls answered with an error status: the task did not run or its outcome is unknown. */
  rejected: number;
  /** By headroom-error-code, or GRPC_<STATUS> when the error carries none. */
  rejectedByCode: Record<string, number>;
  clusters: Record<string, ClusterFigures>;
}

class ClusterCounter {
  completed = 0;
  failed = 0;
  readonly latency: Record<TaskPriority, LatencyHistogram> = { USER_PRESENT: new LatencyHistogram(), BACKGROUND: new LatencyHistogram() };
  readonly errors = new Map<string, number>();

  figures(): ClusterFigures {
    return {
      completed: this.completed,
      failed: this.failed,
      latencyMs: { USER_PRESENT: this.latency.USER_PRESENT.summary(), BACKGROUND: this.latency.BACKGROUND.summary() },
      errorsByCode: Object.fromEntries(this.errors),
    };
  }
}

function countBounded(map: Map<string, number>, key: string, limit: number): void {
  const name = map.has(key) || map.size < limit - 1 ? key : otherKey;
  map.set(name, (map.get(name) ?? 0) + 1);
}

export class FiguresCounter {
  private sent = 0;
  private completed = 0;
  private droppedOutstandingLimit = 0;
  private droppedBehindSchedule = 0;
  private rejected = 0;
  private readonly rejectedByCode = new Map<string, number>();
  private readonly clusters = new Map<string, ClusterCounter>();

  constructor(readonly startedAtMs: number) {}

  countSent(): void {
    this.sent++;
  }

  countDropped(reason: 'outstanding-limit' | 'behind-schedule', tasks = 1): void {
    if (reason === 'outstanding-limit') this.droppedOutstandingLimit += tasks;
    else this.droppedBehindSchedule += tasks;
  }

  countCompleted(cluster: string, priority: TaskPriority, latencyMs: number, errorCode: string | undefined): void {
    this.completed++;
    const counter = this.cluster(cluster);
    counter.completed++;
    counter.latency[priority].record(latencyMs);
    if (errorCode !== undefined) {
      counter.failed++;
      countBounded(counter.errors, errorCode, maxErrorCodes);
    }
  }

  countRejected(code: string): void {
    this.rejected++;
    countBounded(this.rejectedByCode, code, maxErrorCodes);
  }

  figures(nowMs: number): LoadFigures {
    const seconds = Math.max(0.001, (nowMs - this.startedAtMs) / 1000);
    return {
      seconds,
      sent: this.sent,
      sentPerS: this.sent / seconds,
      completed: this.completed,
      completedPerS: this.completed / seconds,
      droppedOutstandingLimit: this.droppedOutstandingLimit,
      droppedBehindSchedule: this.droppedBehindSchedule,
      rejected: this.rejected,
      rejectedByCode: Object.fromEntries(this.rejectedByCode),
      clusters: Object.fromEntries([...this.clusters].map(([name, counter]) => [name, counter.figures()])),
    };
  }

  private cluster(name: string): ClusterCounter {
    const key = this.clusters.has(name) || this.clusters.size < maxClusters - 1 ? name : otherKey;
    let counter = this.clusters.get(key);
    if (!counter) {
      counter = new ClusterCounter();
      this.clusters.set(key, counter);
    }
    return counter;
  }
}
