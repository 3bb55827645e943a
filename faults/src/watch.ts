/**
 * Samples every live process's metrics while a case runs: each worker's high-water mark and max
 * parallelism (a worker killed later keeps what was read of it last), each balancer's queue depth.
 */
import { performance } from 'node:perf_hooks';
import { scrapeMetrics, type MetricsText } from './metrics';
import type { FaultStack, WorkerProcess } from './stack';

export interface WorkerFigures {
  inflight: number;
  maxParallelism: number;
  highWaterMark: number;
}

export interface WorkerRecord {
  /** The highest high-water mark read (it only grows while the process lives). */
  highWaterMark: number;
  /** The highest max parallelism read: the limit the high-water mark is held to. */
  maxParallelismSeen: number;
  last: (WorkerFigures & { atMs: number }) | undefined;
  /** Scrapes that got no answer in time (a blocked event loop, a dead process). */
  missedScrapes: number;
}

export interface QueueSample {
  atMs: number;
  balancerId: string;
  /** Tasks waiting for a slot, all clusters and priorities. */
  queued: number;
}

/** Generous: on a busy shared machine a healthy process can take a second or two to answer. */
const scrapeTimeoutMs = 2500;
/** A watch stops sampling by itself after this long, whatever the case does. */
const maxWatchMs = 180_000;

export function workerFigures(metrics: MetricsText): WorkerFigures {
  return {
    inflight: metrics.value('headroom_worker_tasks_in_flight'),
    maxParallelism: metrics.value('headroom_worker_max_parallelism'),
    highWaterMark: metrics.value('headroom_worker_tasks_in_flight_high_water'),
  };
}

export async function readWorker(worker: WorkerProcess, timeoutMs = scrapeTimeoutMs): Promise<WorkerFigures> {
  return workerFigures(await scrapeMetrics(worker.metricsPort, timeoutMs));
}

export class FleetWatch {
  readonly workers = new Map<string, WorkerRecord>();
  readonly queueSamples: QueueSample[] = [];
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly stack: FaultStack,
    private readonly intervalMs = 250,
  ) {}

  start(): this {
    const endsAtMs = performance.now() + maxWatchMs;
    this.loop = (async () => {
      while (!this.stopped && performance.now() < endsAtMs) {
        await this.sampleNow();
        await new Promise((resolve) => setTimeout(resolve, this.intervalMs));
      }
    })();
    return this;
  }

  /** Stops sampling, then reads every live process once more. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.loop;
    await this.sampleNow();
  }

  async sampleNow(): Promise<void> {
    await Promise.all([...this.stack.liveWorkers().map((w) => this.sampleWorker(w)), ...this.stack.liveBalancers().map((b) => this.sampleBalancer(b.id, b.metricsPort))]);
  }

  record(workerId: string): WorkerRecord {
    let record = this.workers.get(workerId);
    if (!record) {
      record = { highWaterMark: 0, maxParallelismSeen: 0, last: undefined, missedScrapes: 0 };
      this.workers.set(workerId, record);
    }
    return record;
  }

  maxQueued(balancerId?: string): number {
    return Math.max(0, ...this.queueSamples.filter((s) => balancerId === undefined || s.balancerId === balancerId).map((s) => s.queued));
  }

  private async sampleWorker(worker: WorkerProcess): Promise<void> {
    const record = this.record(worker.id);
    try {
      const figures = await readWorker(worker);
      record.highWaterMark = Math.max(record.highWaterMark, figures.highWaterMark);
      record.maxParallelismSeen = Math.max(record.maxParallelismSeen, figures.maxParallelism);
      record.last = { ...figures, atMs: performance.now() };
    } catch {
      record.missedScrapes++;
    }
  }

  private async sampleBalancer(balancerId: string, metricsPort: number): Promise<void> {
    try {
      const metrics = await scrapeMetrics(metricsPort, scrapeTimeoutMs);
      this.queueSamples.push({ atMs: performance.now(), balancerId, queued: metrics.sum('headroom_balancer_queue_depth') });
    } catch {
      // A balancer killed between the list and the scrape: nothing to record.
    }
  }
}
