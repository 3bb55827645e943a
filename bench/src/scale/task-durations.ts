/**
 * Task durations: log-normal, given by the median and by how many times the median the 99th
 * percentile is (median 2 s, p99 20 s: sigma = ln 10 / 2.326 = 0.99, mean 3.26 s).
 */
export interface LogNormalDurations {
  medianMs: number;
  p99OverMedian: number;
}

/** The standard normal's 99th percentile. */
const z99 = 2.326_347_874;

export function logNormalSigma(durations: LogNormalDurations): number {
  return Math.log(durations.p99OverMedian) / z99;
}

export function meanDurationMs(durations: LogNormalDurations): number {
  const sigma = logNormalSigma(durations);
  return durations.medianMs * Math.exp((sigma * sigma) / 2);
}

/** Draws durations; allocates nothing per draw (Box-Muller, the second normal kept for the next draw). */
export class DurationSampler {
  private readonly mu: number;
  private readonly sigma: number;
  private spare = Number.NaN;

  constructor(durations: LogNormalDurations) {
    this.mu = Math.log(durations.medianMs);
    this.sigma = logNormalSigma(durations);
  }

  /** A task's whole duration, in ms. */
  next(): number {
    return Math.exp(this.mu + this.sigma * this.normal());
  }

  /**
   * The time left to run of a task found running at a random moment of the steady state (the
   * fleet's in-flight tasks when it has run at a constant rate for long): a uniform share of a
   * length-biased duration, which for a log-normal is log-normal with mu + sigma^2. Starting a
   * load with rate x mean such tasks puts the fleet in its steady state at once.
   */
  residual(): number {
    return Math.random() * Math.exp(this.mu + this.sigma * this.sigma + this.sigma * this.normal());
  }

  private normal(): number {
    if (!Number.isNaN(this.spare)) {
      const value = this.spare;
      this.spare = Number.NaN;
      return value;
    }
    const u = 1 - Math.random();
    const v = Math.random();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
}
