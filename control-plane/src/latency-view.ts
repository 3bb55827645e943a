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
    /** The clusters compared like with like: see `sameMixFigures`. */
    sameMix: SameMixFigures;
  }[];
  /** Which integrations each cluster ran over the window: the mixes the charts compare. */
  mix: { compared: string[]; baselineOnly: string[]; candidateOnly: string[] };
}

/**
 * Latency of each cluster over only the integrations both ran in the slot, the candidate's
 * weighted to the baseline's mix: a cluster that runs only a fast bank must not look faster.
 */
export interface SameMixFigures {
  baselineP50Ms: number | null;
  baselineP95Ms: number | null;
  candidateP50Ms: number | null;
  candidateP95Ms: number | null;
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
      return {
        startUnixMs: slot.startUnixMs,
        baseline: figures(baseline),
        candidate: figures(candidate),
        integrations,
        sameMix: sameMixFigures(baseline, candidate),
      };
    }),
    mix: mixOf(slots.map((slot) => ({ baseline: slot.clusters.get(clusters.baseline), candidate: slot.clusters.get(clusters.candidate) }))),
  };
}

type ByIntegration = Map<string, LatencyHistogram> | undefined;

function sameMixFigures(baseline: ByIntegration, candidate: ByIntegration): SameMixFigures {
  const b = new LatencyHistogram();
  const c = new LatencyHistogram();
  for (const [integration, ofBaseline] of baseline ?? []) {
    const ofCandidate = candidate?.get(integration);
    if (!ofCandidate || ofCandidate.total === 0 || ofBaseline.total === 0) continue;
    b.merge(ofBaseline);
    // Scaled so that the candidate counts as many tasks of this integration as the baseline ran.
    const weight = ofBaseline.total / ofCandidate.total;
    for (const [bucket, count] of ofCandidate.counts) c.add(bucket, count * weight);
  }
  const baselineSummary = summarise(b);
  const candidateSummary = summarise(c);
  return {
    baselineP50Ms: baselineSummary?.p50Ms ?? null,
    baselineP95Ms: baselineSummary?.p95Ms ?? null,
    candidateP50Ms: candidateSummary?.p50Ms ?? null,
    candidateP95Ms: candidateSummary?.p95Ms ?? null,
  };
}

/** The integrations with a finished task on both clusters over the window, and on only one. */
function mixOf(slots: { baseline: ByIntegration; candidate: ByIntegration }[]): LatencySeries['mix'] {
  const ran = (pick: (slot: (typeof slots)[number]) => ByIntegration) =>
    new Set(slots.flatMap((slot) => [...(pick(slot) ?? [])].filter(([, histogram]) => histogram.total > 0).map(([name]) => name)));
  const onBaseline = ran((slot) => slot.baseline);
  const onCandidate = ran((slot) => slot.candidate);
  return {
    compared: [...onBaseline].filter((name) => onCandidate.has(name)).sort(),
    baselineOnly: [...onBaseline].filter((name) => !onCandidate.has(name)).sort(),
    candidateOnly: [...onCandidate].filter((name) => !onBaseline.has(name)).sort(),
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
