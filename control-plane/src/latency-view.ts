import type { RedisConnection } from '@headroom/fleet';
import { LatencyHistogram, latencyDefaults, readLatency, readLatencySlots } from '@headroom/fleet';

export interface LatencySummary {
  /** Successful tasks in the window. */
  count: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
}

export interface IntegrationLatency {
  integration: string;
  baseline: LatencySummary | null;
  candidate: LatencySummary | null;
  /** candidate / baseline per percentile; null until both clusters ran the integration. */
  ratio: { p50: number; p95: number; p99: number } | null;
}

export interface LatencyView {
  windowSeconds: number;
  clusters: { baseline: LatencySummary | null; candidate: LatencySummary | null };
  integrations: IntegrationLatency[];
}

/**
 * Task latency per integration on each cluster over the last `windowMs`, and the ratio
 * candidate/baseline: the figure that says whether more parallelism slows tasks down. Read
 * from the workers' rolling histograms in Redis, so no Prometheus is needed.
 */
export async function latencyView(
  redis: RedisConnection,
  keyPrefix: string,
  clusters: { baseline: string; candidate: string },
  windowMs: number,
): Promise<LatencyView> {
  const histograms = await readLatency(redis, keyPrefix, windowMs);
  const baseline = histograms.get(clusters.baseline) ?? new Map<string, LatencyHistogram>();
  const candidate = histograms.get(clusters.candidate) ?? new Map<string, LatencyHistogram>();
  const names = [...new Set([...baseline.keys(), ...candidate.keys()])].sort();
  return {
    windowSeconds: windowMs / 1000,
    clusters: { baseline: summarise(mergeAll(baseline.values())), candidate: summarise(mergeAll(candidate.values())) },
    integrations: names.map((integration) => {
      const b = summarise(baseline.get(integration));
      const c = summarise(candidate.get(integration));
      return {
        integration,
        baseline: b,
        candidate: c,
        ratio: b && c ? { p50: ratio(c.p50Ms, b.p50Ms), p95: ratio(c.p95Ms, b.p95Ms), p99: ratio(c.p99Ms, b.p99Ms) } : null,
      };
    }),
  };
}

/** One cluster in one time slot. */
export interface SlotFigures {
  tasksPerSecond: number;
  errorsPerSecond: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface LatencySeries {
  slotSeconds: number;
  /** Complete slots, oldest first. */
  slots: {
    startUnixMs: number;
    baseline: SlotFigures;
    candidate: SlotFigures;
    /** candidate / baseline per integration; null where one cluster ran none of it in the slot. */
    integrations: Record<string, { p50: number | null; p95: number | null }>;
  }[];
}

/**
 * The figures of `latencyView` per time slot, for charts. A slot is complete once workers have
 * added their counts: `settleMs` after it ended (they report every 5 s by default).
 */
export async function latencySeries(
  redis: RedisConnection,
  keyPrefix: string,
  clusters: { baseline: string; candidate: string },
  windowMs: number,
  options: { settleMs: number; nowUnixMs?: number },
): Promise<LatencySeries> {
  const slotMs = latencyDefaults.slotMs;
  const now = options.nowUnixMs ?? Date.now();
  const slots = (await readLatencySlots(redis, keyPrefix, windowMs, { nowUnixMs: now })).filter((slot) => slot.startUnixMs + slotMs + options.settleMs <= now);
  const figures = (byIntegration: Map<string, LatencyHistogram> | undefined): SlotFigures => {
    const merged = mergeAll(byIntegration?.values() ?? []);
    const seconds = slotMs / 1000;
    return {
      tasksPerSecond: round((merged.total + merged.failed) / seconds),
      errorsPerSecond: round(merged.failed / seconds),
      p50Ms: summarise(merged)?.p50Ms ?? null,
      p95Ms: summarise(merged)?.p95Ms ?? null,
    };
  };
  return {
    slotSeconds: slotMs / 1000,
    slots: slots.map((slot) => {
      const baseline = slot.clusters.get(clusters.baseline);
      const candidate = slot.clusters.get(clusters.candidate);
      const integrations: Record<string, { p50: number | null; p95: number | null }> = {};
      for (const integration of new Set([...(baseline?.keys() ?? []), ...(candidate?.keys() ?? [])])) {
        const b = summarise(baseline?.get(integration));
        const c = summarise(candidate?.get(integration));
        integrations[integration] = b && c ? { p50: ratio(c.p50Ms, b.p50Ms), p95: ratio(c.p95Ms, b.p95Ms) } : { p50: null, p95: null };
      }
      return { startUnixMs: slot.startUnixMs, baseline: figures(baseline), candidate: figures(candidate), integrations };
    }),
  };
}

function mergeAll(histograms: Iterable<LatencyHistogram>): LatencyHistogram {
  const merged = new LatencyHistogram();
  for (const histogram of histograms) merged.merge(histogram);
  return merged;
}

function summarise(histogram: LatencyHistogram | undefined): LatencySummary | null {
  if (!histogram || histogram.total === 0) return null;
  return {
    count: histogram.total,
    p50Ms: round(histogram.quantileMs(0.5)!),
    p95Ms: round(histogram.quantileMs(0.95)!),
    p99Ms: round(histogram.quantileMs(0.99)!),
  };
}

function ratio(candidate: number, baseline: number): number {
  return Math.round((candidate / baseline) * 1000) / 1000;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
