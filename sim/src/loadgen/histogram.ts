import * as hdr from 'hdr-histogram-js';

/** Percentiles of one set of latencies, in milliseconds. All zero when `count` is 0. */
export interface LatencySummary {
  count: number;
  p50Ms: number;
  p90Ms: number;
  p95Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
  meanMs: number;
}

const microsecondsPerMs = 1000;

/**
 * Latencies at microsecond resolution (3 significant digits) in an HDR histogram: fixed
 * memory whatever the number of values, from 1 µs to one hour. Shared by the load
 * generator and the benchmarks.
 */
export class LatencyHistogram {
  private readonly histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3 });

  get count(): number {
    return this.histogram.totalCount;
  }

  /** Negative, NaN and infinite values are ignored; values past one hour count as one hour. */
  record(latencyMs: number): void {
    if (!Number.isFinite(latencyMs) || latencyMs < 0) return;
    this.histogram.recordValue(Math.min(3_600_000_000, Math.max(1, Math.round(latencyMs * microsecondsPerMs))));
  }

  summary(): LatencySummary {
    const h = this.histogram;
    if (h.totalCount === 0) return { count: 0, p50Ms: 0, p90Ms: 0, p95Ms: 0, p99Ms: 0, p999Ms: 0, maxMs: 0, meanMs: 0 };
    const at = (percentile: number) => h.getValueAtPercentile(percentile) / microsecondsPerMs;
    return {
      count: h.totalCount,
      p50Ms: at(50),
      p90Ms: at(90),
      p95Ms: at(95),
      p99Ms: at(99),
      p999Ms: at(99.9),
      maxMs: h.maxValue / microsecondsPerMs,
      meanMs: h.mean / microsecondsPerMs,
    };
  }
}
