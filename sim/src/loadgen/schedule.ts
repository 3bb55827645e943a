/**
 * When tasks are due: user-present tasks at a constant rate, background tasks at theirs times
 * `spikeFactor` while a spike lasts. Spikes come every `spikeEveryMs` (the first one after one
 * whole period of steady load) and/or once at `spikeAtMs`; each lasts `spikeDurationMs`.
 * Counts are in closed form from the start, so a late timer sends what it owes, no more.
 */
import type { TaskPriority } from './figures';

export type LoadPhase = 'steady' | 'spike';
export const loadPhases: readonly LoadPhase[] = ['steady', 'spike'];
export const priorities: readonly TaskPriority[] = ['USER_PRESENT', 'BACKGROUND'];

export interface ScheduleOptions {
  ratePerS: number;
  userPresentShare: number;
  /** 0: no periodic spikes. */
  spikeEveryMs: number;
  spikeDurationMs: number;
  spikeFactor: number;
  /** A one-shot spike this long after the start. */
  spikeAtMs?: number | undefined;
}

/** Length of [start, start + length) that lies before `t`. */
const elapsedWithin = (start: number, length: number, t: number) => Math.min(length, Math.max(0, t - start));

export class SendSchedule {
  constructor(private readonly options: ScheduleOptions) {}

  get hasSpikes(): boolean {
    return this.options.spikeEveryMs > 0 || this.options.spikeAtMs !== undefined;
  }

  /** Tasks per second of one priority in one phase. */
  ratePerS(priority: TaskPriority, phase: LoadPhase): number {
    const { ratePerS, userPresentShare, spikeFactor } = this.options;
    if (priority === 'USER_PRESENT') return ratePerS * userPresentShare;
    return ratePerS * (1 - userPresentShare) * (phase === 'spike' ? spikeFactor : 1);
  }

  /** Tasks per second of both priorities in one phase. */
  targetRatePerS(phase: LoadPhase): number {
    return priorities.reduce((sum, priority) => sum + this.ratePerS(priority, phase), 0);
  }

  /** The highest rate of one priority at any time. */
  peakRatePerS(priority: TaskPriority): number {
    return Math.max(this.ratePerS(priority, 'steady'), this.hasSpikes ? this.ratePerS(priority, 'spike') : 0);
  }

  phaseAt(elapsedMs: number): LoadPhase {
    const { spikeEveryMs: everyMs, spikeDurationMs: durationMs, spikeAtMs: atMs } = this.options;
    const periodic = everyMs > 0 && elapsedMs >= everyMs && elapsedMs % everyMs < durationMs;
    const oneShot = atMs !== undefined && elapsedMs >= atMs && elapsedMs < atMs + durationMs;
    return periodic || oneShot ? 'spike' : 'steady';
  }

  /** Time spent in spikes from the start to `elapsedMs`; where the one-shot spike meets a periodic one, counted once. */
  spikeMsUpTo(elapsedMs: number): number {
    const { spikeEveryMs: everyMs, spikeDurationMs: durationMs, spikeAtMs: atMs } = this.options;
    let total = 0;
    if (everyMs > 0 && elapsedMs >= everyMs) {
      const periods = Math.floor(elapsedMs / everyMs);
      total += (periods - 1) * durationMs + elapsedWithin(periods * everyMs, durationMs, elapsedMs);
    }
    if (atMs !== undefined) {
      total += elapsedWithin(atMs, durationMs, elapsedMs);
      if (everyMs > 0) {
        // A spike is shorter than its period, so the one-shot meets periodic spikes of two periods at most.
        const first = Math.max(1, Math.floor(atMs / everyMs));
        for (const period of [first, first + 1]) {
          const start = Math.max(atMs, period * everyMs);
          const end = Math.min(atMs + durationMs, period * everyMs + durationMs);
          if (end > start) total -= elapsedWithin(start, end - start, elapsedMs);
        }
      }
    }
    return total;
  }

  /** Seconds spent in each phase from the start to `elapsedMs`. */
  phaseSeconds(elapsedMs: number): Record<LoadPhase, number> {
    const spikeMs = this.spikeMsUpTo(elapsedMs);
    return { steady: (elapsedMs - spikeMs) / 1000, spike: spikeMs / 1000 };
  }

  /**
   * When the `sequence`-th task of one priority (from 0) fell due, to within a millisecond: the
   * first time dueBy counts it. `notAfterMs` is a time by which it was due (when it was sent).
   */
  dueAtMs(priority: TaskPriority, sequence: number, notAfterMs: number): number {
    let low = 0;
    let high = notAfterMs;
    while (high - low > 1) {
      const middle = (low + high) / 2;
      if (this.dueBy(priority, middle) > sequence) high = middle;
      else low = middle;
    }
    return high;
  }

  /** Tasks of one priority due from the start to `elapsedMs` (whole tasks). */
  dueBy(priority: TaskPriority, elapsedMs: number): number {
    const seconds = this.phaseSeconds(elapsedMs);
    return Math.floor(seconds.steady * this.ratePerS(priority, 'steady') + seconds.spike * this.ratePerS(priority, 'spike') + 1e-9);
  }
}
