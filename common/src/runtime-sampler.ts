import { PerformanceObserver, monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import * as v8 from 'node:v8';

/** How the Node runtime fared between two samples. */
export interface RuntimeSample {
  heapUsedBytes: number;
  /** V8's heap size limit (--max-old-space-size): what heapUsedBytes may grow to. */
  heapLimitBytes: number;
  /** Share of the interval spent in GC pauses (0..1). */
  gcTimeRatio: number;
  /** Share of the interval the event loop was busy (0..1). */
  eventLoopUtilization: number;
  /** 99th percentile of event-loop delay over the interval. */
  eventLoopDelayP99Ms: number;
}

/**
 * Samples the process's heap, GC time and event loop, each sample covering the time since the
 * previous one: the figures a worker reports for the admin UI (Prometheus has its own, from
 * registerProcessMetrics, for dashboards).
 */
export class RuntimeSampler {
  private gcMs = 0;
  private readonly gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) this.gcMs += entry.duration;
  });
  private readonly delay: IntervalHistogram = monitorEventLoopDelay({ resolution: 10 });
  private lastUtilization: EventLoopUtilization = performance.eventLoopUtilization();
  private lastSampleAtMs = performance.now();

  constructor() {
    this.gcObserver.observe({ entryTypes: ['gc'] });
    this.delay.enable();
  }

  sample(): RuntimeSample {
    const nowMs = performance.now();
    const elapsedMs = Math.max(1, nowMs - this.lastSampleAtMs);
    const utilization = performance.eventLoopUtilization();
    const heap = v8.getHeapStatistics();
    // The histogram holds nanoseconds; with no sample yet it reports a huge placeholder.
    const delayP99Ms = this.delay.count > 0 ? this.delay.percentile(99) / 1e6 : 0;
    const sample: RuntimeSample = {
      heapUsedBytes: heap.used_heap_size,
      heapLimitBytes: heap.heap_size_limit,
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
