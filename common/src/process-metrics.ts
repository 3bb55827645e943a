import { PerformanceObserver, constants, performance, type EventLoopUtilization } from 'node:perf_hooks';
import * as v8 from 'node:v8';
import { Gauge, Histogram, collectDefaultMetrics, type Registry } from 'prom-client';

/** GC pauses: 0.1 ms .. 1 s (a scavenge takes about a millisecond, a full mark-sweep more). */
const gcDurationBuckets = [0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];

const gcKinds = new Map<number, string>([
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
]);

/**
 * What every Headroom process reports about its Node runtime, on `registry`:
 * prom-client's default metrics (heap used/total per space, RSS, CPU, active handles,
 * event-loop delay percentiles `nodejs_eventloop_lag_p50_seconds`.., and GC pauses by kind
 * `nodejs_gc_duration_seconds{kind}`: minor = scavenge, major = mark-sweep-compact,
 * incremental = incremental marking, weakcb = weak callbacks), plus
 * `headroom_eventloop_utilization_ratio` (share of time the event loop was busy since the
 * previous scrape), `headroom_heap_limit_bytes` (V8's heap size limit, to compare use with) and
 * `headroom_heap_after_major_gc_bytes` (heap used outside the young generation just after the last
 * full collection: what survives, so a leak shows as a rising line instead of the saw-tooth of
 * `nodejs_heap_size_used_bytes`), and that figure split in two: `headroom_heap_code_after_major_gc_bytes`
 * (V8's compiled code and bytecode with their metadata) and `headroom_heap_objects_after_major_gc_bytes`
 * (the rest: the program's own objects, where a leak of ours shows).
 */
/**
 * What survived the last collection: the heap used outside the young generation. Read when
 * perf_hooks delivers the GC entry, a few milliseconds after the collection; what was allocated
 * since is almost all in the young generation (new_space), left out so that it does not blur the
 * figure (a busy process allocates megabytes in those milliseconds).
 */
function heapSurvivingGc(): number {
  return v8
    .getHeapSpaceStatistics()
    .filter((space) => space.space_name !== 'new_space')
    .reduce((sum, space) => sum + space.space_used_size, 0);
}

export interface ProcessMetricsOptions {
  /**
   * Least time between two reads of V8's code statistics (after a major collection): a read
   * walks the heap, about 5 ms of the event loop for a 25 MiB heap. @default 60_000
   */
  minCodeStatisticsIntervalMs?: number;
}

/**
 * V8's compiled code and bytecode, with their metadata. It grows as V8 compiles more of the
 * program (a code path run for the first time, a function optimised) and falls as it flushes the
 * bytecode of functions not run lately, which are compiled again when they run: bounded by the
 * program's size, but it moves for an hour or more, so it is kept apart from the program's objects.
 */
function heapCodeBytes(): number {
  const code = v8.getHeapCodeStatistics();
  return code.code_and_metadata_size + code.bytecode_and_metadata_size;
}

export function registerProcessMetrics(registry: Registry, options: ProcessMetricsOptions = {}): void {
  const minCodeStatisticsIntervalMs = options.minCodeStatisticsIntervalMs ?? 60_000;
  collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 10 });
  // prom-client 15 records only the first GC of each batch perf_hooks delivers, and misses
  // most of them when collections come close together (a busy parallel worker): ours counts
  // every one, under the same name and labels.
  registry.removeSingleMetric('nodejs_gc_duration_seconds');
  const gcDuration = new Histogram({
    name: 'nodejs_gc_duration_seconds',
    help: 'Garbage collection pauses by kind: minor (scavenge), major (mark-sweep-compact), incremental (marking), weakcb (weak callbacks)',
    labelNames: ['kind'],
    buckets: gcDurationBuckets,
    registers: [registry],
  });
  const heapAfterMajorGc = new Gauge({
    name: 'headroom_heap_after_major_gc_bytes',
    help: 'Heap used outside the young generation just after the last major (mark-sweep-compact) collection (0 until the first)',
    registers: [registry],
  });
  const heapCodeAfterMajorGc = new Gauge({
    name: 'headroom_heap_code_after_major_gc_bytes',
    help: "V8's compiled code and bytecode with their metadata, part of the heap after a major collection (read after one, at most once a minute; 0 until the first)",
    registers: [registry],
  });
  const heapObjectsAfterMajorGc = new Gauge({
    name: 'headroom_heap_objects_after_major_gc_bytes',
    help: "Heap after the last major collection less V8's code and bytecode as last read: the program's own objects, where a leak shows (0 until the first)",
    registers: [registry],
  });
  let codeReadAtMs = Number.NEGATIVE_INFINITY;
  let codeBytes = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = gcKinds.get((entry as { detail?: { kind?: number } }).detail?.kind ?? -1) ?? 'other';
      gcDuration.observe({ kind }, entry.duration / 1000);
      if (kind !== 'major') continue;
      const surviving = heapSurvivingGc();
      heapAfterMajorGc.set(surviving);
      const nowMs = performance.now();
      if (nowMs - codeReadAtMs >= minCodeStatisticsIntervalMs) {
        codeReadAtMs = nowMs;
        codeBytes = heapCodeBytes();
        heapCodeAfterMajorGc.set(codeBytes);
      }
      // Every collection sets it (the code, which moves slowly, as of its last read): a series of
      // it has a point per collection.
      heapObjectsAfterMajorGc.set(surviving - codeBytes);
    }
  }).observe({ entryTypes: ['gc'] });
  let previous: EventLoopUtilization = performance.eventLoopUtilization();
  new Gauge({
    name: 'headroom_eventloop_utilization_ratio',
    help: 'Share of time the event loop was busy since the previous scrape (0..1)',
    registers: [registry],
    collect() {
      const now = performance.eventLoopUtilization();
      this.set(performance.eventLoopUtilization(now, previous).utilization);
      previous = now;
    },
  });
  new Gauge({
    name: 'headroom_heap_limit_bytes',
    help: "V8's heap size limit (set with --max-old-space-size)",
    registers: [registry],
    collect() {
      this.set(v8.getHeapStatistics().heap_size_limit);
    },
  });
}
