import type { RedisConnection } from './redis';
import { parseBalancerErrors } from './balancer-errors';
import { LedgerUnavailableError } from './errors';
import { latencyKeys } from './keys';
import { SlotCounts, latencyDefaults, slotCountsOptions, slotStartsWithin, type SlotSettings } from './time-slots';

/**
 * Rolling task-latency summaries in Redis, mergeable across workers and time: per time slot, a
 * histogram of counts in log-scale buckets per (cluster, integration). Workers add to them;
 * the control plane merges the slots of a window and reads percentiles from the sum. (Averages
 * cannot be merged into percentiles; bucket counts can.)
 *
 * Bucket i > 0 holds latencies in (2^((i-1)/8), 2^(i/8)] ms, about 9% wide; bucket 0 holds
 * up to 1 ms. A percentile is reported as its bucket's geometric middle: within 4.5%.
 */
export { latencyDefaults };

const bucketsPerDoubling = 8;
/** 2^(239/8) ms is about 10 days: nothing runs longer. */
const maxBucket = 239;

export function latencyBucketOf(ms: number): number {
  if (!(ms > 1)) return 0;
  return Math.min(maxBucket, Math.ceil(Math.log2(ms) * bucketsPerDoubling));
}

/** The value a bucket stands for: the geometric middle of its bounds. */
export function latencyBucketValueMs(bucket: number): number {
  return bucket === 0 ? 1 : 2 ** ((bucket - 0.5) / bucketsPerDoubling);
}

/** The field that counts failed tasks, in place of a bucket number. */
const failedField = 'failed';

/**
 * Counts of successful tasks per bucket, and of failed tasks (counted, not timed). As read from
 * Redis, the failed ones include those the balancers failed before any worker ran them
 * (balancer-errors.ts): errors of their cluster and integration too.
 */
export class LatencyHistogram {
  readonly counts = new Map<number, number>();
  /** Successful tasks. */
  total = 0;
  failed = 0;

  add(bucket: number, count = 1): void {
    this.counts.set(bucket, (this.counts.get(bucket) ?? 0) + count);
    this.total += count;
  }

  merge(other: LatencyHistogram): void {
    for (const [bucket, count] of other.counts) this.add(bucket, count);
    this.failed += other.failed;
  }

  /** The latency (ms) at quantile q (0..1); undefined when empty. */
  quantileMs(q: number): number | undefined {
    if (this.total === 0) return undefined;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (const bucket of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(bucket)!;
      if (seen >= rank) return latencyBucketValueMs(bucket);
    }
    return undefined;
  }
}

export interface LatencyRecorderOptions extends SlotSettings {
  keyPrefix: string;
  cluster: string;
}

/**
 * A worker's side: counts latencies in memory and adds them to Redis on flush(). Bounded by
 * slots pending x integrations (the caller bounds those) x buckets.
 */
export class LatencyRecorder {
  private readonly counts: SlotCounts;

  constructor(
    redis: RedisConnection,
    private readonly options: LatencyRecorderOptions,
  ) {
    const keys = latencyKeys(options.keyPrefix);
    this.counts = new SlotCounts(
      redis,
      slotCountsOptions(options, (slotStartMs) => keys.slot(slotStartMs), 'latency flush'),
    );
  }

  /** Samples dropped because Redis was away for longer than maxPendingSlots slots. */
  get dropped(): number {
    return this.counts.dropped;
  }

  /** A successful task and its run time. */
  record(integration: string, ms: number, atUnixMs = Date.now()): void {
    this.counts.add(atUnixMs, `${this.options.cluster}\t${integration}\t${latencyBucketOf(ms)}`);
  }

  /** A failed task: counted for the error rate, not in the latency. */
  recordFailure(integration: string, atUnixMs = Date.now()): void {
    this.counts.add(atUnixMs, `${this.options.cluster}\t${integration}\t${failedField}`);
  }

  /** Adds what was counted to Redis; on failure keeps it for the next flush. */
  flush(): Promise<void> {
    return this.counts.flush();
  }
}

/** Histograms by cluster, then integration, as recorded in one time slot. */
export type LatencyByCluster = Map<string, Map<string, LatencyHistogram>>;

export interface LatencySlot {
  startUnixMs: number;
  clusters: LatencyByCluster;
}

/** Histograms by cluster, then integration, merged over the slots of the last `windowMs`. */
export async function readLatency(
  redis: RedisConnection,
  keyPrefix: string,
  windowMs: number,
  options: { slotMs?: number; nowUnixMs?: number } = {},
): Promise<LatencyByCluster> {
  const merged: LatencyByCluster = new Map();
  for (const slot of await readLatencySlots(redis, keyPrefix, windowMs, options)) {
    for (const [cluster, byIntegration] of slot.clusters) {
      for (const [integration, histogram] of byIntegration) histogramIn(merged, cluster, integration).merge(histogram);
    }
  }
  return merged;
}

/**
 * Each slot that overlaps the last `windowMs`, oldest first (the newest is still filling). A
 * window is at most the retention, so this reads at most 2 x (retentionMs / slotMs + 1) keys: the
 * workers' histograms and the balancers' errors, which count as failed tasks.
 */
export async function readLatencySlots(
  redis: RedisConnection,
  keyPrefix: string,
  windowMs: number,
  options: { slotMs?: number; nowUnixMs?: number } = {},
): Promise<LatencySlot[]> {
  const slotMs = options.slotMs ?? latencyDefaults.slotMs;
  const now = options.nowUnixMs ?? Date.now();
  const keys = latencyKeys(keyPrefix);
  const starts = slotStartsWithin(windowMs, now, slotMs);
  let fieldsBySlot: Record<string, string>[];
  try {
    const pipeline = redis.pipeline();
    for (const start of starts) pipeline.hgetall(keys.slot(start)).hgetall(keys.balancerErrorSlot(start));
    const results = (await pipeline.exec()) ?? [];
    fieldsBySlot = results.map(([error, value]) => {
      if (error) throw error;
      return value as Record<string, string>;
    });
  } catch (error) {
    throw new LedgerUnavailableError('latency read', error);
  }
  return starts.map((startUnixMs, i) => {
    const clusters: LatencyByCluster = new Map();
    for (const [field, count] of Object.entries(fieldsBySlot[2 * i] ?? {})) {
      const [cluster, integration, bucket] = field.split('\t');
      if (cluster === undefined || integration === undefined || bucket === undefined) continue;
      const histogram = histogramIn(clusters, cluster, integration);
      if (bucket === failedField) histogram.failed += Number(count);
      else histogram.add(Number(bucket), Number(count));
    }
    for (const { cluster, integration, count } of parseBalancerErrors(fieldsBySlot[2 * i + 1] ?? {}))
      histogramIn(clusters, cluster, integration).failed += count;
    return { startUnixMs, clusters };
  });
}

function histogramIn(byCluster: LatencyByCluster, cluster: string, integration: string): LatencyHistogram {
  let byIntegration = byCluster.get(cluster);
  if (!byIntegration) byCluster.set(cluster, (byIntegration = new Map()));
  let histogram = byIntegration.get(integration);
  if (!histogram) byIntegration.set(integration, (histogram = new LatencyHistogram()));
  return histogram;
}
