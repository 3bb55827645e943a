/**
 * The auto limit of one integration on one cluster: the decision alone, a pure function of what
 * was measured, so that its rules are tested without a fleet (auto-limiter.ts acts on it).
 *
 * The signal is the integration's run time on the workers (its p50 over a short window) against
 * its own baseline. Run time does not include the wait in the balancers' queues, so the limit
 * does not feed back into its own signal, and no probe that lowers the limit to measure an
 * unloaded latency is needed (Envoy's minRTT probe refuses tasks while it runs).
 *
 * - In trouble (run time above `tolerance` × baseline): the limit falls, at most by half a tick,
 *   to what the integration held when it was healthy (times `headroom`), never below the minimum.
 *   Little's law: at its usual rate a 10x slower upstream would want 10x the slots; holding it at
 *   its usual footprint leaves the rest of the cluster to the other integrations.
 * - Healthy again: the limit doubles each tick up to the maximum, its normal value. Gradient2
 *   grows by about √limit a sample and smooths, which users find slow to ramp up; a doubling
 *   climbs from 8 to 256 in 5 ticks.
 * - The baseline and the healthy footprint follow the integration slowly while it is healthy, and
 *   stand still while it is in trouble, unless the trouble lasts `newNormalAfterMs`: then the
 *   slower run time is taken as the new normal, so that a lasting change does not hold the
 *   integration at its minimum forever.
 */

export interface AutoLimitSetting {
  minInFlight: number;
  maxInFlight: number;
}

export interface AutoLimitTuning {
  /** Run time above this many times the baseline is trouble. */
  tolerance: number;
  /** In trouble, the limit keeps this many times the healthy footprint. */
  headroom: number;
  /** Weight of a new healthy reading in the baseline and the footprint (0..1). */
  baselineWeight: number;
  /** Trouble that lasts this long becomes the new normal. */
  newNormalAfterMs: number;
}

export const defaultAutoLimitTuning: AutoLimitTuning = Object.freeze({ tolerance: 2, headroom: 1.5, baselineWeight: 0.05, newNormalAfterMs: 10 * 60_000 });

/** What the controller remembers between ticks (kept in Redis, so another control plane can take over). */
export interface AutoLimitState {
  limitInFlight: number;
  /** The integration's usual run time p50; null until the first reading. */
  baselineMs: number | null;
  /** How many of its tasks were in flight when healthy (a moving average). */
  healthyInFlight: number;
  /** Since when it has been in trouble; null when healthy. */
  troubleSinceMs: number | null;
}

export interface AutoLimitReading {
  nowMs: number;
  /** Run time p50 over the last window; null when too few tasks ended in it to judge. */
  runTimeP50Ms: number | null;
  /** Its tasks in flight on the cluster now. */
  inFlight: number;
}

export type AutoLimitReason = 'first reading' | 'in trouble' | 'recovering' | 'at its maximum' | 'too few tasks to judge' | 'new normal';

export interface AutoLimitDecision {
  state: AutoLimitState;
  reason: AutoLimitReason;
  /** Run time over baseline this tick; null without a reading or a baseline. */
  latencyRatio: number | null;
}

export function initialAutoLimitState(setting: AutoLimitSetting): AutoLimitState {
  return { limitInFlight: setting.maxInFlight, baselineMs: null, healthyInFlight: 0, troubleSinceMs: null };
}

export function nextAutoLimit(
  setting: AutoLimitSetting,
  state: AutoLimitState,
  reading: AutoLimitReading,
  tuning: AutoLimitTuning = defaultAutoLimitTuning,
): AutoLimitDecision {
  const clamp = (n: number) => Math.min(setting.maxInFlight, Math.max(setting.minInFlight, Math.ceil(n)));
  const current = { ...state, limitInFlight: clamp(state.limitInFlight) };
  const runTimeMs = reading.runTimeP50Ms;
  if (runTimeMs === null) return { state: current, reason: 'too few tasks to judge', latencyRatio: null };
  if (current.baselineMs === null) {
    return { state: { ...current, baselineMs: runTimeMs, healthyInFlight: reading.inFlight, troubleSinceMs: null }, reason: 'first reading', latencyRatio: 1 };
  }
  const latencyRatio = runTimeMs / current.baselineMs;
  if (latencyRatio > tuning.tolerance) {
    const troubleSinceMs = current.troubleSinceMs ?? reading.nowMs;
    if (reading.nowMs - troubleSinceMs >= tuning.newNormalAfterMs) {
      return { state: { ...current, baselineMs: runTimeMs, healthyInFlight: reading.inFlight, troubleSinceMs: null }, reason: 'new normal', latencyRatio };
    }
    const footprint = current.healthyInFlight * tuning.headroom;
    const limitInFlight = clamp(Math.min(current.limitInFlight, Math.max(footprint, current.limitInFlight / 2)));
    return { state: { ...current, limitInFlight, troubleSinceMs }, reason: 'in trouble', latencyRatio };
  }
  const follow = (old: number, now: number) => old + tuning.baselineWeight * (now - old);
  const healthy: AutoLimitState = {
    limitInFlight: clamp(current.limitInFlight * 2),
    baselineMs: follow(current.baselineMs, runTimeMs),
    healthyInFlight: follow(current.healthyInFlight, reading.inFlight),
    troubleSinceMs: null,
  };
  const reason = current.limitInFlight >= setting.maxInFlight ? 'at its maximum' : 'recovering';
  return { state: healthy, reason, latencyRatio };
}
