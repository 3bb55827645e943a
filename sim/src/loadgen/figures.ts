/**
 * What the load generator counts, over one report window, one phase or since it started.
 * Every map is bounded: clusters and error codes beyond the limits are counted as "other".
 */
import { balancerErrorCodes } from '@headroom/balancer';
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

/** The tasks of one priority, whichever cluster ran them. */
export interface PriorityFigures {
  sent: number;
  sentPerS: number;
  completed: number;
  completedPerS: number;
  /** Of those completed, tasks whose handler failed. */
  failed: number;
  rejected: number;
  rejectedByCode: Record<string, number>;
  /** Of the completed tasks, from sending to the answer. */
  latencyMs: LatencySummary;
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
  /** Of the rejected: background tasks that gave their place in the queue to a user-present one (HR_ERR_SHED). */
  shed: number;
  /** Of the rejected: tasks refused because the balancer's queue was full (HR_ERR_QUEUE_FULL). */
  queueFull: number;
  priorities: Record<TaskPriority, PriorityFigures>;
  clusters: Record<string, ClusterFigures>;
}

function countBounded(map: Map<string, number>, key: string, limit: number): void {
  const name = map.has(key) || map.size < limit - 1 ? key : otherKey;
  map.set(name, (map.get(name) ?? 0) + 1);
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

class PriorityCounter {
  sent = 0;
  completed = 0;
  failed = 0;
  rejected = 0;
  readonly rejectedByCode = new Map<string, number>();
  readonly latency = new LatencyHistogram();

  figures(seconds: number): PriorityFigures {
    return {
      sent: this.sent,
      sentPerS: this.sent / seconds,
      completed: this.completed,
      completedPerS: this.completed / seconds,
      failed: this.failed,
      rejected: this.rejected,
      rejectedByCode: Object.fromEntries(this.rejectedByCode),
      latencyMs: this.latency.summary(),
    };
  }
}

export class FiguresCounter {
  private droppedOutstandingLimit = 0;
  private droppedBehindSchedule = 0;
  private shed = 0;
  private queueFull = 0;
  private readonly rejectedByCode = new Map<string, number>();
  private readonly priorities: Record<TaskPriority, PriorityCounter> = { USER_PRESENT: new PriorityCounter(), BACKGROUND: new PriorityCounter() };
  private readonly clusters = new Map<string, ClusterCounter>();

  countSent(priority: TaskPriority): void {
    this.priorities[priority].sent++;
  }

  countDropped(reason: 'outstanding-limit' | 'behind-schedule', tasks = 1): void {
    if (reason === 'outstanding-limit') this.droppedOutstandingLimit += tasks;
    else this.droppedBehindSchedule += tasks;
  }

  countCompleted(cluster: string, priority: TaskPriority, latencyMs: number, errorCode: string | undefined): void {
    const counter = this.cluster(cluster);
    const byPriority = this.priorities[priority];
    counter.completed++;
    byPriority.completed++;
    counter.latency[priority].record(latencyMs);
    byPriority.latency.record(latencyMs);
    if (errorCode !== undefined) {
      counter.failed++;
      byPriority.failed++;
      countBounded(counter.errors, errorCode, maxErrorCodes);
    }
  }

  countRejected(priority: TaskPriority, code: string): void {
    this.priorities[priority].rejected++;
    countBounded(this.rejectedByCode, code, maxErrorCodes);
    countBounded(this.priorities[priority].rejectedByCode, code, maxErrorCodes);
    if (code === balancerErrorCodes.shed) this.shed++;
    if (code === balancerErrorCodes.queueFull) this.queueFull++;
  }

  /** The figures, with rates over `seconds`. */
  figures(seconds: number): LoadFigures {
    const perS = Math.max(0.001, seconds);
    const priorities = { USER_PRESENT: this.priorities.USER_PRESENT.figures(perS), BACKGROUND: this.priorities.BACKGROUND.figures(perS) };
    const sent = priorities.USER_PRESENT.sent + priorities.BACKGROUND.sent;
    const completed = priorities.USER_PRESENT.completed + priorities.BACKGROUND.completed;
    return {
      seconds,
      sent,
      sentPerS: sent / perS,
      completed,
      completedPerS: completed / perS,
      droppedOutstandingLimit: this.droppedOutstandingLimit,
      droppedBehindSchedule: this.droppedBehindSchedule,
      rejected: priorities.USER_PRESENT.rejected + priorities.BACKGROUND.rejected,
      rejectedByCode: Object.fromEntries(this.rejectedByCode),
      shed: this.shed,
      queueFull: this.queueFull,
      priorities,
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
