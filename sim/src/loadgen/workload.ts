/**
 * What the load generator submits: which integration, key and priority, and how long the
 * simulated upstream call takes (payload {sleepMs}, see sim/src/handlers/demo.ts).
 */
import type { Task } from '@headroom/proto';

export interface IntegrationProfile {
  integration: string;
  /** Half the calls take less than this. */
  medianSleepMs: number;
  /** Spread of the log-normal distribution: 0.8 makes p99 about 6x the median. */
  sigma: number;
  /** Longest simulated call, so one unlucky draw cannot hold a slot for minutes. */
  maxSleepMs: number;
}

export interface WorkloadOptions {
  integrations: readonly string[];
  /** Median upstream time of the first and of the last integration; those between are spread evenly. */
  medianSleepMsRange: readonly [number, number];
  sleepSigma: number;
  maxSleepMs: number;
  userPresentShare: number;
  keyCount: number;
  taskTimeoutMs: number;
}

export function integrationProfiles(options: WorkloadOptions): IntegrationProfile[] {
  const [lowMs, highMs] = options.medianSleepMsRange;
  const steps = Math.max(1, options.integrations.length - 1);
  return options.integrations.map((integration, i) => ({
    integration,
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

export class Workload {
  readonly profiles: readonly IntegrationProfile[];
  private readonly runId: string;
  private sequence = 0;

  constructor(
    private readonly options: WorkloadOptions,
    private readonly random: () => number = Math.random,
  ) {
    this.profiles = integrationProfiles(options);
    this.runId = Math.floor(random() * 2 ** 32).toString(36);
  }

  next(nowUnixMs = Date.now()): Task {
    this.sequence++;
    const profile = this.profiles[Math.floor(this.random() * this.profiles.length)]!;
    const sleepMs = Math.min(profile.maxSleepMs, Math.round(logNormal(profile.medianSleepMs, profile.sigma, this.random)));
    return {
      id: `lg-${this.runId}-${this.sequence}`,
      key: `account-${Math.floor(this.random() * this.options.keyCount)}`,
      integration: profile.integration,
      priority: this.random() < this.options.userPresentShare ? 'USER_PRESENT' : 'BACKGROUND',
      payload: Buffer.from(JSON.stringify({ sleepMs })),
      deadlineUnixMs: nowUnixMs + this.options.taskTimeoutMs,
      idempotent: true,
    };
  }
}
