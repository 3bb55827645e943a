/**
 * Whether one integration is in trouble, judged against its own recent past rather than against
 * the other cluster: a bank that is slow for both clusters leaves the candidate/baseline ratio
 * near 1, yet it is the first thing an operator must see. Pure, so a table of cases tests it.
 */

/** One integration's figures over one window, both clusters together. */
export interface WindowFigures {
  /** Successful tasks: the ones with a latency. */
  tasks: number;
  /** Failed tasks, the balancers' included. */
  errors: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

export interface TroubleRule {
  /** The window judged. @default 60000 */
  recentMs: number;
  /** The window before it, the integration's own baseline. @default 600000 */
  previousMs: number;
  /** Trouble when the recent p99 is at least this many times the previous one... @default 3 */
  p99RatioAtLeast: number;
  /** ...and at least this much above it: 20 ms to 60 ms is noise for a bank call. @default 250 */
  p99RiseAtLeastMs: number;
  /** Trouble when at least this share of the recent tasks failed, whatever the baseline. @default 0.1 */
  errorShareAtLeast: number;
  /** Fewer tasks (successful and failed) in a window judge nothing. @default 20 */
  minTasks: number;
}

export const troubleRuleDefaults: TroubleRule = {
  recentMs: 60_000,
  previousMs: 600_000,
  p99RatioAtLeast: 3,
  p99RiseAtLeastMs: 250,
  errorShareAtLeast: 0.1,
  minTasks: 20,
};

export type TroubleState = 'trouble' | 'ok' | 'not-enough-data';

export interface TroubleVerdict {
  state: TroubleState;
  /** Recent p99 / previous p99; null without enough tasks in either window. */
  p99Ratio: number | null;
  /** Failed / all tasks in the recent window; null without enough tasks. */
  errorShare: number | null;
  /** What makes it trouble, as an operator reads it: "bank-c p99 4.1 s, 9.8x its last 10 min (420 ms)". */
  reasons: string[];
}

export function judgeIntegration(integration: string, recent: WindowFigures, previous: WindowFigures, rule: TroubleRule = troubleRuleDefaults): TroubleVerdict {
  const recentAll = recent.tasks + recent.errors;
  if (recentAll < rule.minTasks) return { state: 'not-enough-data', p99Ratio: null, errorShare: null, reasons: [] };
  const reasons: string[] = [];
  const errorShare = recent.errors / recentAll;
  const previousLabel = `its previous ${formatDuration(rule.previousMs)}`;
  if (errorShare >= rule.errorShareAtLeast) {
    const previousAll = previous.tasks + previous.errors;
    const before = previousAll >= rule.minTasks ? formatShare(previous.errors / previousAll) : 'too few tasks';
    reasons.push(`${integration} errors ${formatShare(errorShare)} of ${recentAll} tasks (${previousLabel}: ${before})`);
  }
  let p99Ratio: number | null = null;
  const judgeable = recent.tasks >= rule.minTasks && previous.tasks >= rule.minTasks && recent.p99Ms !== null && previous.p99Ms !== null && previous.p99Ms > 0;
  if (judgeable) {
    p99Ratio = Math.round((recent.p99Ms! / previous.p99Ms!) * 100) / 100;
    if (p99Ratio >= rule.p99RatioAtLeast && recent.p99Ms! - previous.p99Ms! >= rule.p99RiseAtLeastMs)
      reasons.push(`${integration} p99 ${formatLatency(recent.p99Ms!)}, ${p99Ratio.toFixed(1)}x ${previousLabel} (${formatLatency(previous.p99Ms!)})`);
  }
  return { state: reasons.length > 0 ? 'trouble' : 'ok', p99Ratio, errorShare: Math.round(errorShare * 10_000) / 10_000, reasons };
}

/**
 * How far past its lines a verdict is (1 = on a line), for ordering: the worst first, so that a
 * capped list never hides the integration in the most trouble.
 */
export function troubleSeverity(verdict: TroubleVerdict, rule: TroubleRule = troubleRuleDefaults): number {
  if (verdict.state !== 'trouble') return 0;
  return Math.max((verdict.p99Ratio ?? 0) / rule.p99RatioAtLeast, (verdict.errorShare ?? 0) / rule.errorShareAtLeast);
}

/** Integrations in trouble first (worst first), then the busiest; at most `max`, and how many are left out. */
export function pickShown<T extends { integration: string; verdict: TroubleVerdict; recent: WindowFigures }>(
  all: T[],
  max: number,
  rule: TroubleRule = troubleRuleDefaults,
): { shown: T[]; hidden: number; hiddenInTrouble: number } {
  const ordered = [...all].sort(
    (a, b) =>
      troubleSeverity(b.verdict, rule) - troubleSeverity(a.verdict, rule) ||
      b.recent.tasks + b.recent.errors - (a.recent.tasks + a.recent.errors) ||
      a.integration.localeCompare(b.integration),
  );
  const rest = ordered.slice(max);
  return { shown: ordered.slice(0, max), hidden: rest.length, hiddenInTrouble: rest.filter((item) => item.verdict.state === 'trouble').length };
}

export function formatLatency(ms: number): string {
  return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
}

function formatShare(share: number): string {
  return `${(share * 100).toFixed(1)}%`;
}

function formatDuration(ms: number): string {
  return ms % 60_000 === 0 ? `${ms / 60_000} min` : `${Math.round(ms / 1000)} s`;
}
