/**
 * Keeps the auto-limit benchmark from rotting: runs it in smoke mode (two workers, one balancer,
 * a control plane ticking every 500 ms, a few seconds of incident) as its own process, as
 * `npm run bench -- auto-limit --smoke` would, and checks the JSON it writes: the slow bank put in
 * auto mode at its maximum, its decisions read over the repetition, the figures and the goals
 * there. Never how fast: in a few seconds the limit need not move.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { AutoLimitResult } from '../src/auto-limit';
import { runSmoke } from './smoke-run';

const timeoutMs = 110_000;

test('the auto-limit benchmark runs end to end in smoke mode and reads the limit it put in auto mode', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<AutoLimitResult>(t, 'auto-limit', timeoutMs);

  assert.equal(result.benchmark, 'auto-limit');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.capacityTasksPerSecond > 0 && result.offeredTasksPerSecond > 0);
  assert.equal(result.repetitions.length, result.settings.repetitions);
  const { maxInFlight, minInFlight } = result.settings.auto;
  for (const r of result.repetitions) {
    assert.ok(r.history.length > 0, `repetition ${r.repetition}: no decision read`);
    assert.ok(r.history.every((p) => p.atUnixMs >= r.phaseStartUnixMs && p.limitInFlight >= minInFlight && p.limitInFlight <= maxInFlight));
    // Auto mode starts at the maximum; the lead-in's decisions come before the incident.
    assert.equal(r.limit.atStartInFlight, maxInFlight, JSON.stringify(r.history));
    assert.ok(r.incidentStartUnixMs < r.incidentEndUnixMs && r.incidentEndUnixMs < r.observedUntilUnixMs);
    assert.ok(r.limit.decisions > 0);
    for (const figure of [r.limit.settledAfterMs, r.limit.backAfterMs]) assert.ok(figure === null || figure >= 0, JSON.stringify(r.limit));
    assert.ok(r.tasks.othersBefore.tasks > 0 && r.tasks.othersDuring.tasks > 0, JSON.stringify(r.tasks));
    assert.ok(Number.isFinite(r.tasks.othersBefore.p99Ms) && Number.isFinite(r.tasks.othersDuring.p99Ms));
    assert.equal(r.tasks.lostTasks, 0, 'every task sent got an answer');
  }
  assert.ok(result.measuredTickMs > 0);
  assert.equal(result.goals.length, 6);
  for (const goal of result.goals.slice(0, 5)) assert.equal(typeof goal.met, 'boolean', goal.name);
});
