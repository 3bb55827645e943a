/** The middle of several repetitions, and how far they spread. */
export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function spread(values: readonly number[]): Spread {
  if (values.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  const median = sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { median, min: sorted[0]!, max: sorted[sorted.length - 1]! };
}

/** "0.42 (0.40..0.47)"; just the median when there was one repetition. */
export function formatSpread(value: Spread, digits = 2): string {
  const f = (n: number) => n.toFixed(digits);
  return value.min === value.max ? f(value.median) : `${f(value.median)} (${f(value.min)}..${f(value.max)})`;
}

/** Exact figures of a few measurements (a benchmark's repetitions), in milliseconds. */
export interface Figures {
  count: number;
  medianMs: number;
  /** Nearest rank: of 100 values or fewer, the largest. */
  p99Ms: number;
  /** Nearest rank: of 1,000 values or fewer, the largest. */
  p999Ms: number;
  maxMs: number;
}

export function figures(values: readonly number[]): Figures {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (quantile: number) => sorted[Math.max(1, Math.ceil(quantile * sorted.length)) - 1] ?? Number.NaN;
  return { count: sorted.length, medianMs: spread(sorted).median, p99Ms: at(0.99), p999Ms: at(0.999), maxMs: sorted[sorted.length - 1] ?? Number.NaN };
}

/** Calls that did not succeed: answered with an error (any code), or never sent (`dropped`). */
export function failedCalls(result: { errorsByCode: Record<string, number>; dropped?: number }): number {
  return Object.values(result.errorsByCode).reduce((sum, n) => sum + n, 0) + (result.dropped ?? 0);
}
