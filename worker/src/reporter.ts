import { RuntimeSampler } from '@headroom/common';
import { LatencyHistogram, latencyBucketOf, type WorkerReport } from '@headroom/fleet';

/** Adds up what a worker did between two reports, and samples its runtime. */
export class WorkerReporter {
  private readonly runtime = new RuntimeSampler();
  private latency = new LatencyHistogram();
  private lastReportAtMs = Date.now();

  taskSucceeded(runMs: number): void {
    this.latency.add(latencyBucketOf(runMs));
  }

  taskFailed(): void {
    this.latency.failed++;
  }

  /** The report for the time since the previous one; starts a new interval. */
  next(nowUnixMs = Date.now()): WorkerReport {
    const elapsedSeconds = Math.max(0.001, (nowUnixMs - this.lastReportAtMs) / 1000);
    const latency = this.latency;
    this.latency = new LatencyHistogram();
    this.lastReportAtMs = nowUnixMs;
    return {
      atUnixMs: nowUnixMs,
      ...this.runtime.sample(),
      latencyP50Ms: latency.quantileMs(0.5) ?? null,
      latencyP99Ms: latency.quantileMs(0.99) ?? null,
      tasksPerSecond: (latency.total + latency.failed) / elapsedSeconds,
      errorsPerSecond: latency.failed / elapsedSeconds,
    };
  }

  close(): void {
    this.runtime.close();
  }
}
