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
