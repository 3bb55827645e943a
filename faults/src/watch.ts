/**
 * Samples every live process's metrics while a case runs: each worker's high-water mark and max
 * parallelism (a worker killed later keeps what was read of it last), each balancer's queue depth;
 * with `ledger`, also the ledger's count of each worker next to the worker's own (ledger-watch.ts).
 */
import { performance } from 'node:perf_hooks';
import { LedgerReader, type LedgerReadOptions, type LedgerSample, type WorkerLedgerCount } from './ledger-watch';
import { scrapeMetrics, type MetricsText } from './metrics';
import { keyPrefix, type FaultStack, type WorkerProcess } from './stack';

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

export interface FleetWatchOptions {
  /**
   * Read the ledger at every sample too, in the same moment as the workers' metrics
   * (`ledgerSamples`, see ledger-watch.ts). Off by default: it costs Redis a MULTI per sample.
   */
  ledger?: Omit<LedgerReadOptions, 'keyPrefix'>;
}

export class FleetWatch {
  readonly workers = new Map<string, WorkerRecord>();
  readonly queueSamples: QueueSample[] = [];
  /** With `ledger`: one per live worker per sample, when both its metrics and the ledger answered (bounded: the watch stops by itself after maxWatchMs). */
  readonly ledgerSamples: LedgerSample[] = [];
  /** With `ledger`: samples whose ledger read failed (Redis away). */
  missedLedgerReads = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly ledgerReader: LedgerReader | undefined;

  constructor(
    private readonly stack: FaultStack,
    private readonly intervalMs = 250,
    options: FleetWatchOptions = {},
  ) {
    this.ledgerReader = options.ledger && new LedgerReader(stack.ledgerRedis, { keyPrefix, ...options.ledger });
  }

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
    const atMs = performance.now();
    const workers = this.stack.liveWorkers();
    // Started together, so that a worker's own count and the ledger's are read about the same moment.
    const [figures, ledgerCounts] = await Promise.all([
      Promise.all(workers.map((w) => this.sampleWorker(w))),
      this.readLedger(workers),
      Promise.all(this.stack.liveBalancers().map((b) => this.sampleBalancer(b.id, b.metricsPort))),
    ]);
    if (!ledgerCounts) return;
    workers.forEach((worker, i) => {
      const own = figures[i];
      const counted = ledgerCounts.get(worker.id);
      if (own && counted) this.ledgerSamples.push({ atMs, workerId: worker.id, runningTasks: own.inflight, scrapeMs: own.scrapeMs, ...counted });
    });
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

  /** Undefined when the worker did not answer in time. */
  private async sampleWorker(worker: WorkerProcess): Promise<(WorkerFigures & { scrapeMs: number }) | undefined> {
    const record = this.record(worker.id);
    try {
      const scrapedFromMs = performance.now();
      const figures = await readWorker(worker);
      const atMs = performance.now();
      record.highWaterMark = Math.max(record.highWaterMark, figures.highWaterMark);
      record.maxParallelismSeen = Math.max(record.maxParallelismSeen, figures.maxParallelism);
      record.last = { ...figures, atMs };
      return { ...figures, scrapeMs: atMs - scrapedFromMs };
    } catch {
      record.missedScrapes++;
      return undefined;
    }
  }

  /** Undefined when the ledger is not watched or could not be read. */
  private async readLedger(workers: readonly WorkerProcess[]): Promise<Map<string, WorkerLedgerCount> | undefined> {
    if (!this.ledgerReader) return undefined;
    try {
      const counts = new Map<string, WorkerLedgerCount>();
      for (const cluster of this.stack.clusters) {
        const ids = workers.filter((w) => w.cluster === cluster).map((w) => w.id);
        for (const [workerId, count] of await this.ledgerReader.read(cluster, ids)) counts.set(workerId, count);
      }
      return counts;
    } catch {
      this.missedLedgerReads++;
      return undefined;
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
