import type { RedisConnection } from '@headroom/fleet';
import { LatencyHistogram, latencyDefaults, readLatencySlots, type LatencySlot } from '@headroom/fleet';
import { judgeIntegration, pickShown, troubleRuleDefaults, type TroubleRule, type TroubleVerdict, type WindowFigures } from './integration-trouble';

/** One integration in one time slot, both clusters together. */
export interface IntegrationSlot {
  startUnixMs: number;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Failed / all tasks; null when none ended in the slot. */
  errorShare: number | null;
}

export interface IntegrationHealth {
  integration: string;
  recent: WindowFigures;
  /** Its p99 is the median of the slots' p99s: see `typicalP99Ms`. */
  previous: WindowFigures;
  verdict: TroubleVerdict;
  /** Complete slots of both windows, oldest first. */
  slots: IntegrationSlot[];
}

export interface IntegrationHealthView {
  slotSeconds: number;
  rule: TroubleRule;
  /** In trouble first (worst first), then the busiest; at most `maxShown`. */
  integrations: IntegrationHealth[];
  hiddenIntegrations: number;
  hiddenInTrouble: number;
}

export interface IntegrationHealthOptions {
  settleMs: number;
  /** Integrations shown (and labelled in metrics): a fleet may run hundreds. @default 8 */
  maxShown?: number;
  rule?: TroubleRule;
  nowUnixMs?: number;
}

/**
 * Each integration's own latency and errors over its recent window and the window before it,
 * both clusters together, with the verdict of `judgeIntegration`. Read from the workers'
 * histograms (and the balancers' errors) in Redis, complete slots only.
 */
export async function integrationHealth(redis: RedisConnection, keyPrefix: string, options: IntegrationHealthOptions): Promise<IntegrationHealthView> {
  const rule = options.rule ?? troubleRuleDefaults;
  const slotMs = latencyDefaults.slotMs;
  const now = options.nowUnixMs ?? Date.now();
  const recentSlots = Math.max(1, Math.round(rule.recentMs / slotMs));
  const previousSlots = Math.max(1, Math.round(rule.previousMs / slotMs));
  const complete = (await readLatencySlots(redis, keyPrefix, rule.recentMs + rule.previousMs + options.settleMs + slotMs, { nowUnixMs: now })).filter(
    (slot) => slot.startUnixMs + slotMs + options.settleMs <= now,
  );
  const slots = complete.slice(-(recentSlots + previousSlots));
  const byIntegration = pooledByIntegration(slots);
  const all = [...byIntegration].map(([integration, histograms]): IntegrationHealth => {
    const recent = figuresOf(histograms.slice(-recentSlots));
    const previous = { ...figuresOf(histograms.slice(0, -recentSlots)), p99Ms: typicalP99Ms(histograms.slice(0, -recentSlots)) };
    return {
      integration,
      recent,
      previous,
      verdict: judgeIntegration(integration, recent, previous, rule),
      slots: histograms.map((histogram, i) => slotOf(slots[i]!.startUnixMs, histogram)),
    };
  });
  const { shown, hidden, hiddenInTrouble } = pickShown(all, options.maxShown ?? 8, rule);
  return { slotSeconds: slotMs / 1000, rule, integrations: shown, hiddenIntegrations: hidden, hiddenInTrouble };
}

/** Per integration, one histogram per slot (aligned with `slots`), the clusters merged. */
function pooledByIntegration(slots: LatencySlot[]): Map<string, LatencyHistogram[]> {
  const pooled = new Map<string, LatencyHistogram[]>();
  slots.forEach((slot, i) => {
    for (const byIntegration of slot.clusters.values()) {
      for (const [integration, histogram] of byIntegration) {
        let series = pooled.get(integration);
        if (!series) pooled.set(integration, (series = slots.map(() => new LatencyHistogram())));
        series[i]!.merge(histogram);
      }
    }
  });
  return pooled;
}

function figuresOf(histograms: LatencyHistogram[]): WindowFigures {
  const merged = new LatencyHistogram();
  for (const histogram of histograms) merged.merge(histogram);
  return { tasks: merged.total, errors: merged.failed, p50Ms: quantile(merged, 0.5), p99Ms: quantile(merged, 0.99) };
}

/**
 * The median of the slots' p99s. The p99 of the whole window would take a trouble in as its
 * own baseline once it filled 1% of the window (6 s of 10 min); the median takes half of it.
 */
function typicalP99Ms(histograms: LatencyHistogram[]): number | null {
  const p99s = histograms.map((histogram) => quantile(histogram, 0.99)).filter((ms) => ms !== null);
  if (p99s.length === 0) return null;
  p99s.sort((a, b) => a - b);
  const middle = p99s.length / 2;
  return p99s.length % 2 === 1 ? p99s[Math.floor(middle)]! : (p99s[middle - 1]! + p99s[middle]!) / 2;
}

function slotOf(startUnixMs: number, histogram: LatencyHistogram): IntegrationSlot {
  const all = histogram.total + histogram.failed;
  return {
    startUnixMs,
    p50Ms: quantile(histogram, 0.5),
    p99Ms: quantile(histogram, 0.99),
    errorShare: all === 0 ? null : Math.round((histogram.failed / all) * 10_000) / 10_000,
  };
}

function quantile(histogram: LatencyHistogram, q: number): number | null {
  const ms = histogram.quantileMs(q);
  return ms === undefined ? null : Math.round(ms * 100) / 100;
}
