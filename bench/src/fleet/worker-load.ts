/**
 * How evenly a fleet's workers were loaded over a window, as each worker counts it itself: its
 * /metrics `headroom_worker_tasks_in_flight` plus `headroom_worker_local_queue_depth`. The ledger
 * would not do: balancers without a shared count (plain-round-robin, least-request) take no slot
 * in it, so it sees none of their tasks.
 */
import { performance } from 'node:perf_hooks';
import { sleep } from '@headroom/common';
import { getText } from './http-get';
import { parsePrometheusText } from './runtime-metrics';

export interface WorkerLoadFigures {
  /** Rounds in which every worker answered. */
  samples: number;
  /** Time-averaged tasks per worker (running + waiting in its local queue), by worker name. */
  meanLoadByWorker: Record<string, number>;
  /** Time-averaged tasks waiting in the workers' local queues, all workers together. */
  meanLocalQueued: number;
  /** Most tasks one worker had waiting in its local queue at a sample. */
  peakLocalQueueDepth: number;
  /**
   * Per sample, the busiest worker's load over the fleet's mean load, averaged over the samples
   * with any load: 1 is perfectly even; 2 means the busiest worker carried twice its share.
   */
  meanMaxOverMeanLoad: number;
  /** Share of the samples in which some worker had a task waiting in its local queue while another had a free slot. */
  queuedBesideFreeSlotShare: number;
  /** Time-averaged tasks running on the workers, all together. */
  meanWorkerInflight: number;
  /**
   * With `ledgerLeases`: the ledger's leases, time-averaged. Over meanWorkerInflight, by Little's
   * law, how much longer the ledger holds a slot than the worker runs the task.
   */
  meanLedgerLeases?: number;
}

export interface WorkerLoadOptions {
  workers: readonly { name: string; metricsUrl: string }[];
  maxParallelismPerWorker: number;
  windowMs: number;
  intervalMs: number;
  scrapeTimeoutMs: number;
  /** The ledger's count of the cluster's leases, read with the workers when given. */
  ledgerLeases?: () => Promise<number>;
  signal: AbortSignal;
}

/** Reads every worker's /metrics each interval until the window ends. */
export async function sampleWorkerLoad(options: WorkerLoadOptions): Promise<WorkerLoadFigures> {
  const { workers, signal } = options;
  const loadSums = new Map(workers.map((w) => [w.name, 0]));
  let queuedSum = 0;
  let peakQueue = 0;
  let ratioSum = 0;
  let ratioSamples = 0;
  let queuedBesideFree = 0;
  let inflightSum = 0;
  let leasesSum = 0;
  let samples = 0;
  const endsAt = performance.now() + options.windowMs;
  // Bounded by the window and the interval.
  while (performance.now() < endsAt) {
    const roundStartedAt = performance.now();
    const [leases, ...read] = await Promise.all([
      options.ledgerLeases?.().catch(() => Number.NaN) ?? Promise.resolve(0),
      ...workers.map(async (w) => {
        try {
          const metrics = parsePrometheusText(await getText(w.metricsUrl, options.scrapeTimeoutMs, signal));
          const value = (name: string) => metrics.find((m) => m.name === name)?.value ?? 0;
          return { name: w.name, inflight: value('headroom_worker_tasks_in_flight'), queued: value('headroom_worker_local_queue_depth') };
        } catch {
          signal.throwIfAborted();
          // A scrape that timed out on a busy machine: this round is left out.
          return undefined;
        }
      }),
    ]);
    if (read.every((r) => r !== undefined) && Number.isFinite(leases)) {
      samples++;
      leasesSum += leases!;
      inflightSum += read.reduce((sum, r) => sum + r.inflight, 0);
      const loads = read.map((r) => r.inflight + r.queued);
      for (const r of read) loadSums.set(r.name, loadSums.get(r.name)! + r.inflight + r.queued);
      queuedSum += read.reduce((sum, r) => sum + r.queued, 0);
      peakQueue = Math.max(peakQueue, ...read.map((r) => r.queued));
      const mean = loads.reduce((sum, n) => sum + n, 0) / loads.length;
      if (mean > 0) {
        ratioSum += Math.max(...loads) / mean;
        ratioSamples++;
      }
      if (read.some((r) => r.queued > 0) && read.some((r) => r.inflight < options.maxParallelismPerWorker)) queuedBesideFree++;
    }
    const nextAt = roundStartedAt + options.intervalMs;
    await sleep(Math.max(0, Math.min(nextAt, endsAt) - performance.now()), signal);
  }
  return {
    samples,
    meanLoadByWorker: Object.fromEntries([...loadSums].map(([name, sum]) => [name, samples > 0 ? sum / samples : Number.NaN])),
    meanLocalQueued: samples > 0 ? queuedSum / samples : Number.NaN,
    peakLocalQueueDepth: peakQueue,
    meanMaxOverMeanLoad: ratioSamples > 0 ? ratioSum / ratioSamples : Number.NaN,
    queuedBesideFreeSlotShare: samples > 0 ? queuedBesideFree / samples : Number.NaN,
    meanWorkerInflight: samples > 0 ? inflightSum / samples : Number.NaN,
    ...(options.ledgerLeases ? { meanLedgerLeases: samples > 0 ? leasesSum / samples : Number.NaN } : {}),
  };
}
