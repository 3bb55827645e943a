import type { RedisConnection } from './redis';
import { LedgerUnavailableError } from './errors';
import { reportKeys, type ReportKeys } from './keys';

/** What a worker says of itself every few seconds, for the admin UI: runtime health and task figures over the last interval. */
export interface WorkerReport {
  atUnixMs: number;
  heapUsedBytes: number;
  heapLimitBytes: number;
  /** Share of the interval spent in GC pauses (0..1). */
  gcTimeRatio: number;
  /** Share of the interval the event loop was busy (0..1). */
  eventLoopUtilization: number;
  eventLoopDelayP99Ms: number;
  /** Run time of the tasks that succeeded in the interval; null when none did. */
  latencyP50Ms: number | null;
  latencyP99Ms: number | null;
  tasksPerSecond: number;
  errorsPerSecond: number;
  /** The worker advertises fewer slots: its event loop stalled or its heap neared the limit (worker/src/self-protection.ts); null or absent: it advertises all. */
  selfProtection?: WorkerSelfProtection | null;
}

export interface WorkerSelfProtection {
  reason: 'event-loop-delay' | 'heap';
  /** The figure that crossed its line (ms of event-loop delay p99, or heap used ÷ limit), and the line. */
  figure: number;
  line: number;
  /** Share of its slots the worker advertises (1/2, 1/4, ...; never less than one slot). */
  slotShare: number;
  sinceUnixMs: number;
}

/** Ids one MGET asks for: keeps each reply bounded however large the fleet. */
const idsPerRead = 500;

/**
 * Worker reports in Redis, one key per worker that expires on its own, so a worker that dies
 * leaves nothing behind. The keys share one hash tag: a read is one MGET, on Redis Cluster too.
 */
export class WorkerReports {
  private readonly keys: ReportKeys;

  constructor(
    private readonly redis: RedisConnection,
    keyPrefix: string,
  ) {
    this.keys = reportKeys(keyPrefix);
  }

  keyOf(workerId: string): string {
    return this.keys.worker(workerId);
  }

  async publish(workerId: string, report: WorkerReport, ttlMs: number): Promise<void> {
    await this.guard('publish worker report', () => this.redis.set(this.keyOf(workerId), JSON.stringify(report), 'PX', ttlMs));
  }

  async remove(workerId: string): Promise<void> {
    await this.guard('remove worker report', () => this.redis.del(this.keyOf(workerId)));
  }

  /** The reports of these workers that have one. */
  async read(workerIds: readonly string[]): Promise<Map<string, WorkerReport>> {
    const reports = new Map<string, WorkerReport>();
    for (let start = 0; start < workerIds.length; start += idsPerRead) {
      const ids = workerIds.slice(start, start + idsPerRead);
      const values = await this.guard('read worker reports', () => this.redis.mget(...ids.map((id) => this.keyOf(id))));
      values.forEach((value, i) => {
        const report = value === null ? undefined : parseReport(value);
        if (report) reports.set(ids[i]!, report);
      });
    }
    return reports;
  }

  private async guard<T>(operation: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw new LedgerUnavailableError(operation, error);
    }
  }
}

/** A report written by a worker of another version may lack fields: such a report is skipped, not shown half. */
function parseReport(raw: string): WorkerReport | undefined {
  try {
    const parsed = JSON.parse(raw) as Partial<WorkerReport>;
    const numbers = [
      'atUnixMs',
      'heapUsedBytes',
      'heapLimitBytes',
      'gcTimeRatio',
      'eventLoopUtilization',
      'eventLoopDelayP99Ms',
      'tasksPerSecond',
      'errorsPerSecond',
    ] as const;
    if (!numbers.every((name) => typeof parsed[name] === 'number')) return undefined;
    const orNull = (value: unknown) => (typeof value === 'number' ? value : null);
    return { ...(parsed as WorkerReport), latencyP50Ms: orNull(parsed.latencyP50Ms), latencyP99Ms: orNull(parsed.latencyP99Ms) };
  } catch {
    return undefined;
  }
}
