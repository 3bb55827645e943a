import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { initialAutoLimitState, nextAutoLimit, type AutoLimitDecision, type AutoLimitSetting, type AutoLimitState } from '../src/limits/auto-limit';

const setting: AutoLimitSetting = { minInFlight: 4, maxInFlight: 64 };
const tickMs = 5_000;
const windowMs = 10_000;

/**
 * A bank at 100 tasks/s whose run time is `runTimeMsAt(t)`; each tick reads the p50 of the last
 * window (as the workers' histograms give it, lagging the change) and the tasks in flight, which
 * Little's law gives, capped by the limit.
 */
function simulate(runTimeMsAt: (ms: number) => number, untilMs: number): { atMs: number; decision: AutoLimitDecision }[] {
  let state: AutoLimitState = initialAutoLimitState(setting);
  const decisions: { atMs: number; decision: AutoLimitDecision }[] = [];
  for (let nowMs = tickMs; nowMs <= untilMs; nowMs += tickMs) {
    const window = Array.from({ length: windowMs / 1000 }, (_, i) => runTimeMsAt(nowMs - i * 1000)).sort((a, b) => a - b);
    const p50 = window[window.length / 2]!;
    const inFlight = Math.min(state.limitInFlight, Math.ceil((100 * p50) / 1000));
    const decision = nextAutoLimit(setting, state, { nowMs, runTimeP50Ms: p50, inFlight });
    state = decision.state;
    decisions.push({ atMs: nowMs, decision });
  }
  return decisions;
}

test('an incident (10x slower for 60 s): the limit settles within 60 s of its start at the usual footprint, and is back at its maximum within 60 s of its end', () => {
  const start = 600_000;
  const end = start + 60_000;
  const decisions = simulate((ms) => (ms >= start && ms < end ? 1000 : 100), end + 120_000);
  const limitAt = (ms: number) => decisions.find((d) => d.atMs === ms)!.decision.state.limitInFlight;
  assert.equal(limitAt(start), 64, 'healthy: the maximum');
  // The usual footprint is 10 in flight (100/s × 100 ms); with 1.5x headroom, 15.
  const settledAt = decisions.find((d) => d.atMs > start && d.decision.state.limitInFlight === 15)?.atMs;
  assert.ok(settledAt !== undefined && settledAt - start <= 60_000, `settled ${settledAt! - start} ms after the start`);
  for (const d of decisions.filter((d) => d.atMs >= settledAt! && d.atMs < end)) assert.equal(d.decision.state.limitInFlight, 15, `at ${d.atMs - start} ms`);
  const backAt = decisions.find((d) => d.atMs >= end && d.decision.state.limitInFlight === 64)?.atMs;
  assert.ok(backAt !== undefined && backAt - end <= 60_000, `back at the maximum ${backAt! - end} ms after the end`);
  // The baseline stood still during the incident.
  const baseline = decisions.find((d) => d.atMs === end)!.decision.state.baselineMs!;
  assert.ok(baseline > 95 && baseline < 105, `baseline ${baseline} ms`);
});

test('the limit falls at most by half a tick, and never below the minimum', () => {
  const tiny: AutoLimitState = { limitInFlight: 64, baselineMs: 100, healthyInFlight: 0.5, troubleSinceMs: null };
  const limits: number[] = [];
  let state = tiny;
  for (let i = 1; i <= 6; i++) {
    state = nextAutoLimit(setting, state, { nowMs: i * tickMs, runTimeP50Ms: 1000, inFlight: state.limitInFlight }).state;
    limits.push(state.limitInFlight);
  }
  assert.deepEqual(limits, [32, 16, 8, 4, 4, 4]);
});

test('too few tasks to judge keeps the limit; a first reading sets the baseline at the maximum', () => {
  const first = nextAutoLimit(setting, initialAutoLimitState(setting), { nowMs: 0, runTimeP50Ms: null, inFlight: 0 });
  assert.equal(first.reason, 'too few tasks to judge');
  assert.equal(first.state.limitInFlight, 64);
  const second = nextAutoLimit(setting, first.state, { nowMs: tickMs, runTimeP50Ms: 250, inFlight: 7 });
  assert.equal(second.reason, 'first reading');
  assert.deepEqual(second.state, { limitInFlight: 64, baselineMs: 250, healthyInFlight: 7, troubleSinceMs: null });
  const troubled: AutoLimitState = { limitInFlight: 20, baselineMs: 100, healthyInFlight: 10, troubleSinceMs: 0 };
  assert.equal(nextAutoLimit(setting, troubled, { nowMs: tickMs, runTimeP50Ms: null, inFlight: 20 }).state.limitInFlight, 20);
});

test('trouble that lasts 10 minutes becomes the new normal, and the limit climbs back', () => {
  let state: AutoLimitState = { limitInFlight: 64, baselineMs: 100, healthyInFlight: 10, troubleSinceMs: null };
  const reasons = new Set<string>();
  for (let nowMs = tickMs; nowMs <= 11 * 60_000; nowMs += tickMs) {
    const decision = nextAutoLimit(setting, state, { nowMs, runTimeP50Ms: 400, inFlight: state.limitInFlight });
    reasons.add(decision.reason);
    state = decision.state;
  }
  assert.ok(reasons.has('new normal'), [...reasons].join(', '));
  assert.equal(state.baselineMs! > 300, true, `baseline ${state.baselineMs}`);
  assert.equal(state.limitInFlight, 64);
});

test('a setting changed under a running state is obeyed at once', () => {
  const state: AutoLimitState = { limitInFlight: 64, baselineMs: 100, healthyInFlight: 10, troubleSinceMs: null };
  const narrower = nextAutoLimit({ minInFlight: 2, maxInFlight: 20 }, state, { nowMs: tickMs, runTimeP50Ms: 100, inFlight: 10 });
  assert.equal(narrower.state.limitInFlight, 20);
  const wider = nextAutoLimit({ minInFlight: 30, maxInFlight: 80 }, { ...state, limitInFlight: 8 }, { nowMs: tickMs, runTimeP50Ms: 1000, inFlight: 8 });
  assert.equal(wider.state.limitInFlight, 30);
});
