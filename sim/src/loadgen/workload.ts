/**
 * What the load generator submits: which integration (by weight), key (some accounts much
 * busier than others) and priority, and how long the simulated upstream call takes
 * (payload {sleepMs}, see sim/src/handlers/demo.ts), with any fields of a payload template.
 */
import type { Task } from '@headroom/proto';
import type { TaskPriority } from './figures';
import type { WeightedIntegration } from './options';

export interface IntegrationProfile {
  integration: string;
  /** Share of all tasks that go to this integration, 0..1. */
  share: number;
  /** Half the calls take less than this. */
  medianSleepMs: number;
  /** Spread of the log-normal distribution: 0.8 makes p99 about 6x the median. */
  sigma: number;
  /** Longest simulated call, so one unlucky draw cannot hold a slot for minutes. */
  maxSleepMs: number;
}

export interface WorkloadOptions {
  /** Names (weight 1) or names with weights. */
  integrations: readonly (string | WeightedIntegration)[];
  /** Median upstream time of the first and of the last integration; those between are spread evenly. */
  medianSleepMsRange: readonly [number, number];
  sleepSigma: number;
  maxSleepMs: number;
  userPresentShare: number;
  keyCount: number;
  /** Exponent of the key ranks' power law; 0 (the default) makes every key alike. */
  keySkew?: number;
  taskTimeoutMs: number;
  /** Fields added to every payload; a sleepMs here replaces the draw. */
  payload?: Readonly<Record<string, unknown>> | undefined;
}

export function integrationProfiles(options: WorkloadOptions): IntegrationProfile[] {
  const [lowMs, highMs] = options.medianSleepMsRange;
  const steps = Math.max(1, options.integrations.length - 1);
  const weighted = options.integrations.map((entry) => (typeof entry === 'string' ? { name: entry, weight: 1 } : entry));
  const totalWeight = weighted.reduce((sum, entry) => sum + entry.weight, 0);
  return weighted.map(({ name, weight }, i) => ({
    integration: name,
    share: weight / totalWeight,
    medianSleepMs: Math.round(lowMs + ((highMs - lowMs) * i) / steps),
    sigma: options.sleepSigma,
    maxSleepMs: options.maxSleepMs,
  }));
}

/** A log-normal draw (Box-Muller): most values near the median, a long tail above it. */
export function logNormal(medianMs: number, sigma: number, random: () => number): number {
  const u = 1 - random(); // (0, 1]: log(0) would be -Infinity
  const normal = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * random());
  return medianMs * Math.exp(sigma * normal);
}

/**
 * A rank from 0 (busiest) to count - 1, from `u` in [0, 1): the inverse of a power law with
 * density x^-skew over [1, count + 1), so rank r is drawn about (r + 1)^-skew as often as
 * rank 0. A Zipf-like spread in constant time and memory, whatever the count.
 */
export function skewedRank(count: number, skew: number, u: number): number {
  const x = Math.abs(1 - skew) < 1e-9 ? (count + 1) ** u : (1 + u * ((count + 1) ** (1 - skew) - 1)) ** (1 / (1 - skew));
  return Math.min(count - 1, Math.max(0, Math.floor(x) - 1));
}

export class Workload {
  readonly profiles: readonly IntegrationProfile[];
  private readonly cumulativeShares: readonly number[];
  /** The payload of every task when the template fixes sleepMs. */
  private readonly fixedPayload: Buffer | undefined;
  private readonly runId: string;
  private sequence = 0;

  constructor(
    private readonly options: WorkloadOptions,
    private readonly random: () => number = Math.random,
  ) {
    this.profiles = integrationProfiles(options);
    let cumulative = 0;
    this.cumulativeShares = this.profiles.map((profile) => (cumulative += profile.share));
    this.fixedPayload = options.payload && 'sleepMs' in options.payload ? Buffer.from(JSON.stringify(options.payload)) : undefined;
    this.runId = Math.floor(random() * 2 ** 32).toString(36);
  }

  /** The next task; its priority is drawn (userPresentShare) unless given. */
  next(nowUnixMs = Date.now(), priority: TaskPriority = this.random() < this.options.userPresentShare ? 'USER_PRESENT' : 'BACKGROUND'): Task {
    this.sequence++;
    const profile = this.pickIntegration();
    return {
      id: `lg-${this.runId}-${this.sequence}`,
      key: `account-${skewedRank(this.options.keyCount, this.options.keySkew ?? 0, this.random())}`,
      integration: profile.integration,
      priority,
      payload: this.fixedPayload ?? this.drawPayload(profile),
      deadlineUnixMs: nowUnixMs + this.options.taskTimeoutMs,
      idempotent: true,
    };
  }

  private pickIntegration(): IntegrationProfile {
    const u = this.random();
    const index = this.cumulativeShares.findIndex((cumulative) => u < cumulative);
    // Rounding can leave the last cumulative share a hair under 1.
    return this.profiles[index === -1 ? this.profiles.length - 1 : index]!;
  }

  private drawPayload(profile: IntegrationProfile): Buffer {
    const sleepMs = Math.min(profile.maxSleepMs, Math.round(logNormal(profile.medianSleepMs, profile.sigma, this.random)));
    return Buffer.from(JSON.stringify({ sleepMs, ...this.options.payload }));
  }
}
