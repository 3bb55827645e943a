/**
 * A latency histogram of fixed size: geometric buckets, each 5% wider than the one
 * before, from 0.1 ms to about 16 minutes. A percentile is the upper edge of its bucket
 * (capped at the largest value seen), so it is at most 5% above the true value.
 */
const smallestMs = 0.1;
const growth = 1.05;
const bucketCount = Math.ceil(Math.log(1_000_000 / smallestMs) / Math.log(growth)) + 1;

export interface LatencySummary {
  count: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

export class LatencyHistogram {
  private readonly counts = new Uint32Array(bucketCount);
  private total = 0;
  private largestMs = 0;

  get count(): number {
    return this.total;
  }

  record(ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return;
    const index = ms <= smallestMs ? 0 : Math.min(bucketCount - 1, Math.ceil(Math.log(ms / smallestMs) / Math.log(growth)));
    this.counts[index]!++;
    this.total++;
    if (ms > this.largestMs) this.largestMs = ms;
  }

  /** The value below which `share` (0..1) of the recorded values lie; 0 when empty. */
  percentile(share: number): number {
    if (this.total === 0) return 0;
    const rank = Math.max(1, Math.ceil(share * this.total));
    let seen = 0;
    for (let i = 0; i < bucketCount; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(smallestMs * growth ** i, this.largestMs);
    }
    return this.largestMs;
  }

  summary(): LatencySummary {
    return { count: this.total, p50Ms: this.percentile(0.5), p95Ms: this.percentile(0.95), p99Ms: this.percentile(0.99), maxMs: this.largestMs };
  }
}
