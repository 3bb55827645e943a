/**
 * A worker's runtime over a window of a benchmark run: its /metrics (event-loop utilisation,
 * CPU, heap, task durations) and the totals of every GC pause (gc-totals.ts), read at the start,
 * every scrape interval and at the end, and turned into figures over the window.
 */
import { performance } from 'node:perf_hooks';
import { sleep } from '@headroom/common';
import { byGcKind, gcKinds, readGcTotals, type GcKind, type GcTotals } from './gc-totals';
import { scrapeRuntime, type RuntimeSnapshot } from './runtime-metrics';

/** What a benchmark reads of the worker, once a scrape interval. */
export interface WorkerSample {
  /** performance.now() here once both answers arrived. */
  atMs: number;
  runtime: RuntimeSnapshot;
  everyGc: GcTotals;
}

export interface WorkerWindowOptions {
  metricsUrl: string;
  /** Where gc-observing-handlers.ts serves the worker's GC totals. */
  gcTotalsPort: number;
  windowMs: number;
  scrapeIntervalMs: number;
  scrapeTimeoutMs: number;
  signal: AbortSignal;
}

/** Reads the worker at once, then every scrape interval until `windowMs` has passed (at least two samples). */
export async function sampleWorkerWindow(options: WorkerWindowOptions): Promise<WorkerSample[]> {
  const { metricsUrl, gcTotalsPort, scrapeTimeoutMs, signal } = options;
  const sample = async (): Promise<WorkerSample> => {
    const [runtime, everyGc] = await Promise.all([scrapeRuntime(metricsUrl, scrapeTimeoutMs, signal), readGcTotals(gcTotalsPort, scrapeTimeoutMs, signal)]);
    return { atMs: performance.now(), runtime, everyGc };
  };
  const samples = [await sample()];
  const windowEndsAt = samples[0]!.atMs + options.windowMs;
  // Bounded: each pass sleeps until the next scrape is due, and the window ends.
  while (samples[samples.length - 1]!.atMs < windowEndsAt) {
    await sleep(Math.min(options.scrapeIntervalMs, windowEndsAt - samples[samples.length - 1]!.atMs), signal);
    samples.push(await sample());
  }
  return samples;
}

const mib = (bytes: number) => bytes / 1024 / 1024;
const mean = (values: readonly number[]) => values.reduce((sum, v) => sum + v, 0) / values.length;
const countOf = (totals: GcTotals) => gcKinds.reduce((sum, kind) => sum + totals.countByKind[kind], 0);

/** GC over the window from `first` to `last`, both totals since the process started. */
function gcFigures(first: GcTotals, last: GcTotals, seconds: number) {
  const percentOfWallByKind = byGcKind((kind) => ((last.secondsByKind[kind] - first.secondsByKind[kind]) / seconds) * 100);
  return {
    percentOfWall: gcKinds.reduce((sum, kind) => sum + percentOfWallByKind[kind], 0),
    percentOfWallByKind,
    countByKind: byGcKind((kind) => last.countByKind[kind] - first.countByKind[kind]),
  };
}

export interface WorkerFigures {
  /** Between the first and the last sample. */
  windowMs: number;
  /** Every GC pause of the main thread (perf_hooks) over wall time, by kind and in all. */
  gcPercentOfWall: number;
  gcPercentOfWallByKind: Record<GcKind, number>;
  gcCountByKind: Record<GcKind, number>;
  /** The same from nodejs_gc_duration_seconds, which misses pauses that came in one batch. */
  gcPercentOfWallByMetric: number;
  gcCountByKindByMetric: Record<GcKind, number>;
  /** Share of the pauses (all kinds) the metric did not count. */
  gcPausesMissedByMetricPercent: number;
  scavengesPerSecond: number;
  markSweepsPerSecond: number;
  /** Busy share of the worker's event loop over the window (GC pauses included). */
  eventLoopUtilizationPercent: number;
  /** The worker process's CPU, GC helper threads included, in percent of one core. */
  workerCpuPercentOfCore: number;
  /** Mean time in the handler (the worker's task-duration histogram). */
  handlerMeanMs: number;
  heapUsedMeanMiB: number;
  heapUsedMaxMiB: number;
  heapLimitMiB: number;
  newSpaceMaxMiB: number;
}

/** The worker's figures between the first and the last of `samples` (at least two). */
export function workerFigures(samples: readonly WorkerSample[]): WorkerFigures {
  const first = samples[0]!;
  const last = samples[samples.length - 1]!;
  const windowMs = last.atMs - first.atMs;
  const seconds = windowMs / 1000;
  const everyGc = gcFigures(first.everyGc, last.everyGc, seconds);
  const byMetric = gcFigures(first.runtime.gc, last.runtime.gc, seconds);
  const pauses = countOf(last.everyGc) - countOf(first.everyGc);
  const pausesByMetric = countOf(last.runtime.gc) - countOf(first.runtime.gc);
  // Each scrape's utilisation covers the time since the one before: weigh it by that time.
  const busyMs = samples.slice(1).reduce((sum, s, index) => sum + s.runtime.eventLoopUtilizationSinceLastScrape * (s.atMs - samples[index]!.atMs), 0);
  const tasks = last.runtime.taskCount - first.runtime.taskCount;
  const heapUsed = samples.map((s) => s.runtime.heapUsedBytes);
  return {
    windowMs,
    gcPercentOfWall: everyGc.percentOfWall,
    gcPercentOfWallByKind: everyGc.percentOfWallByKind,
    gcCountByKind: everyGc.countByKind,
    gcPercentOfWallByMetric: byMetric.percentOfWall,
    gcCountByKindByMetric: byMetric.countByKind,
    gcPausesMissedByMetricPercent: pauses > 0 ? (1 - pausesByMetric / pauses) * 100 : 0,
    scavengesPerSecond: everyGc.countByKind.minor / seconds,
    markSweepsPerSecond: everyGc.countByKind.major / seconds,
    eventLoopUtilizationPercent: (busyMs / windowMs) * 100,
    workerCpuPercentOfCore: ((last.runtime.cpuSeconds - first.runtime.cpuSeconds) / seconds) * 100,
    handlerMeanMs: tasks > 0 ? ((last.runtime.taskDurationSecondsSum - first.runtime.taskDurationSecondsSum) / tasks) * 1000 : Number.NaN,
    heapUsedMeanMiB: mib(mean(heapUsed)),
    heapUsedMaxMiB: mib(Math.max(...heapUsed)),
    heapLimitMiB: mib(last.runtime.heapLimitBytes),
    newSpaceMaxMiB: mib(Math.max(...samples.map((s) => s.runtime.newSpaceBytes))),
  };
}
