import { PerformanceObserver, monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import * as v8 from 'node:v8';

/** How the Node runtime fared between two samples. */
export interface RuntimeSample {
  /** Old generation in use (V8's old, code and large-object spaces): what a leak grows. */
  heapUsedBytes: number;
  /**
   * What heapUsedBytes may grow to before V8 fails with "heap out of memory": the old
   * generation's limit (--max-old-space-size), not V8's heap_size_limit, which adds three
   * semi-spaces for the young generation (48 MiB by default) that the old one cannot use.
   */
  heapLimitBytes: number;
  /** Share of the interval spent in GC pauses (0..1). */
  gcTimeRatio: number;
  /** Share of the interval the event loop was busy (0..1). */
  eventLoopUtilization: number;
  /** 99th percentile of event-loop delay over the interval. */
  eventLoopDelayP99Ms: number;
}

const mib = 2 ** 20;
/** V8's young generation: collected often, outside the old generation's limit. */
const youngSpaces = new Set(['new_space', 'new_large_object_space']);

/** The V8 flags this process runs with: its command line's, then NODE_OPTIONS's. */
export function nodeFlags(): string[] {
  return [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/).filter((flag) => flag !== '')];
}

function flagMiB(flags: readonly string[], name: string): number | undefined {
  // V8 takes dashes or underscores, "=value" or the value as the next argument; the last one wins.
  let value: number | undefined;
  flags.forEach((flag, i) => {
    const normalised = flag.replace(/_/g, '-');
    if (normalised.startsWith(`--${name}=`)) value = Number(normalised.slice(name.length + 3));
    else if (normalised === `--${name}`) value = Number(flags[i + 1]);
  });
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : undefined;
}

/**
 * The old generation's limit in bytes. V8's heap_size_limit is the old generation's limit plus
 * the young generation's (three semi-spaces: 16 MiB each by default on 64-bit, smaller when V8
 * sizes the heap for a small machine by itself, about old ÷ 128 each).
 */
export function oldGenerationLimitBytes(heapSizeLimitBytes: number, flags: readonly string[]): number {
  const oldMiB = flagMiB(flags, 'max-old-space-size');
  if (oldMiB !== undefined) return Math.min(heapSizeLimitBytes, oldMiB * mib);
  const semiMiB = flagMiB(flags, 'max-semi-space-size') ?? Math.min(16, heapSizeLimitBytes / mib / 131);
  return Math.max(heapSizeLimitBytes / 2, heapSizeLimitBytes - 3 * semiMiB * mib);
}

/**
 * Samples the process's heap, GC time and event loop, each sample covering the time since the
 * previous one: the figures a worker reports for the admin UI (Prometheus has its own, from
 * registerProcessMetrics, for dashboards).
 */
export class RuntimeSampler {
  private gcMs = 0;
  // Only the part of a pause inside the current sample counts: an entry is delivered after it
  // ends, so one that began before the previous sample would otherwise count in full against a
  // short interval and read as a share of 1 on a busy process.
  private readonly gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const endMs = entry.startTime + entry.duration;
      this.gcMs += Math.max(0, endMs - Math.max(entry.startTime, this.lastSampleAtMs));
    }
  });
  private readonly delay: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  private lastUtilization: EventLoopUtilization = performance.eventLoopUtilization();
  private lastSampleAtMs = performance.now();
  private readonly oldGenerationLimitBytes = oldGenerationLimitBytes(v8.getHeapStatistics().heap_size_limit, nodeFlags());

  constructor() {
    this.gcObserver.observe({ entryTypes: ['gc'] });
    this.delay.enable();
  }

  sample(): RuntimeSample {
    const nowMs = performance.now();
    const elapsedMs = Math.max(1, nowMs - this.lastSampleAtMs);
    const utilization = performance.eventLoopUtilization();
    const heap = v8.getHeapStatistics();
    let youngUsedBytes = 0;
    for (const space of v8.getHeapSpaceStatistics()) {
      if (youngSpaces.has(space.space_name)) youngUsedBytes += space.space_used_size;
    }
    // The histogram holds nanoseconds; with no sample yet it reports a huge placeholder.
    const delayP99Ms = this.delay.count > 0 ? this.delay.percentile(99) / 1e6 : 0;
    const sample: RuntimeSample = {
      heapUsedBytes: Math.max(0, heap.used_heap_size - youngUsedBytes),
      heapLimitBytes: this.oldGenerationLimitBytes,
      gcTimeRatio: Math.min(1, this.gcMs / elapsedMs),
      eventLoopUtilization: performance.eventLoopUtilization(utilization, this.lastUtilization).utilization,
      eventLoopDelayP99Ms: delayP99Ms,
    };
    this.gcMs = 0;
    this.delay.reset();
    this.lastUtilization = utilization;
    this.lastSampleAtMs = nowMs;
    return sample;
  }

  close(): void {
    this.gcObserver.disconnect();
    this.delay.disable();
  }
}
