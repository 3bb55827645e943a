/**
 * Keeps the incidents benchmark from rotting: runs it in smoke mode (two workers per cluster, one
 * balancer per alternative, a second before and a second and a half of incident) as its own
 * process, as `npm run bench -- incidents --smoke` would, and checks the JSON it writes: every
 * alternative measured before and during the incident, the slow bank's tasks slowed, no task lost,
 * goals judged. Never how good.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { alternativesOf, type IncidentsResult } from '../src/incidents';
import { runSmoke } from './smoke-run';

const timeoutMs = 90_000;

test('the incidents benchmark runs end to end in smoke mode and measures every alternative', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<IncidentsResult>(t, 'incidents', timeoutMs);

  assert.equal(result.benchmark, 'incidents');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.capacityTasksPerSecond > 0);
  const names = alternativesOf(result.settings).map((a) => a.name);
  assert.deepEqual(new Set(result.summaries.map((s) => s.alternative)), new Set(names));
  assert.equal(result.summaries.length, names.length * result.settings.repetitions);
  for (const s of result.summaries) {
    assert.ok(s.othersBefore.tasks > 0 && s.othersDuring.tasks > 0, `${s.alternative}: others measured: ${JSON.stringify(s)}`);
    assert.ok(s.slowBefore.tasks > 0 && s.slowDuring.tasks > 0, `${s.alternative}: slow bank measured`);
    assert.ok(Number.isFinite(s.othersBefore.p99Ms) && Number.isFinite(s.othersDuring.p99Ms), `${s.alternative}: p99s`);
    assert.equal(s.lostTasks, 0, `${s.alternative}: every task sent got an answer`);
    // The payload's factor reached the handlers: the slow bank's tasks that ran took longer during the incident.
    if (s.slowDuring.tasks > s.slowDuring.missed)
      assert.ok(s.slowDuring.runP99Ms > s.slowBefore.runP99Ms, `${s.alternative}: slow bank slowed: ${JSON.stringify(s)}`);
  }
  assert.ok(result.goals.length >= 1);
  for (const goal of result.goals) assert.equal(typeof goal.met, 'boolean');
});
