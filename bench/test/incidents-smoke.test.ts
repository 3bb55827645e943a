/**
 * Keeps the incidents benchmark from rotting: runs it in smoke mode (two workers per cluster, two
 * fronts per alternative, one of them a proxyless client for Headroom's; a second or so per part
 * of each scenario) as its own process, as `npm run bench -- incidents --smoke` would, and checks
 * the JSON it writes: every alternative measured in every scenario, the slow bank's tasks slowed,
 * the spike's extra background tasks sent, no task lost, goals judged. Never how good.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { alternativesOf, scenarioNames, type IncidentsResult } from '../src/incidents';
import { runSmoke } from './smoke-run';

// Some 85 s alone; two minutes beside other work (five alternatives' fronts start one after another).
const timeoutMs = 180_000;

test('the incidents benchmark runs end to end in smoke mode and measures every alternative in every scenario', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<IncidentsResult>(t, 'incidents', timeoutMs);

  assert.equal(result.benchmark, 'incidents');
  assert.equal(result.mode, 'smoke');
  assert.deepEqual(result.scenarios, [...scenarioNames]);
  assert.ok(result.capacityTasksPerSecond > 0);
  const alternatives = alternativesOf(result.settings);
  assert.ok(
    alternatives.some((a) => a.proxylessFronts > 0),
    'some fronts are proxyless clients',
  );
  const names = alternatives.map((a) => a.name);
  const runs = names.length * result.settings.repetitions;
  for (const summaries of [result.slowBank, result.backgroundSpike, result.highLoad]) {
    assert.deepEqual(new Set(summaries.map((s) => s.alternative)), new Set(names));
    assert.equal(summaries.length, runs);
    for (const s of summaries) assert.equal(s.lostTasks, 0, `${s.alternative}: every task sent got an answer`);
  }
  for (const s of result.slowBank) {
    assert.ok(s.othersBefore.tasks > 0 && s.othersDuring.tasks > 0, `${s.alternative}: others measured: ${JSON.stringify(s)}`);
    assert.ok(s.slowBefore.tasks > 0 && s.slowDuring.tasks > 0, `${s.alternative}: slow bank measured`);
    assert.ok(Number.isFinite(s.othersBefore.p99Ms) && Number.isFinite(s.othersDuring.p99Ms), `${s.alternative}: p99s`);
    // The payload's factor reached the handlers: the slow bank's tasks that ran took longer during the incident.
    if (s.slowDuring.tasks > s.slowDuring.missed)
      assert.ok(s.slowDuring.runP99Ms > s.slowBefore.runP99Ms, `${s.alternative}: slow bank slowed: ${JSON.stringify(s)}`);
  }
  const { beforeMs, spikeMs, factor } = result.settings.backgroundSpike;
  for (const s of result.backgroundSpike) {
    assert.ok(s.userBefore.tasks > 0 && s.userDuring.tasks > 0, `${s.alternative}: user-present measured: ${JSON.stringify(s)}`);
    // The extra schedule ran: background tasks per second during the spike well above before it (factor x, less rounding).
    const perSecond = (tasks: number, ms: number) => tasks / (ms / 1000);
    assert.ok(
      perSecond(s.backgroundDuring.tasks, spikeMs) > (factor / 2) * perSecond(s.backgroundBefore.tasks, beforeMs),
      `${s.alternative}: background spiked: ${s.backgroundBefore.tasks} before, ${s.backgroundDuring.tasks} during`,
    );
    assert.ok(s.userDuring.queueWaitP50Ms <= s.userDuring.queueWaitP99Ms || s.userDuring.tasks === 0, `${s.alternative}: queue wait p50 <= p99`);
    // The slot wait is part of what latency minus run time holds (travel and CPU queueing are the rest).
    assert.ok(
      s.userDuring.slotWaitP99Ms >= 0 && s.userDuring.slotWaitP99Ms <= s.userDuring.queueWaitP99Ms + 1,
      `${s.alternative}: slot wait p99 ${s.userDuring.slotWaitP99Ms} within the queue wait p99 ${s.userDuring.queueWaitP99Ms}`,
    );
  }
  for (const s of result.highLoad) {
    assert.ok(s.all.tasks > 0 && s.user.tasks > 0, `${s.alternative}: high load measured`);
    if (s.all.tasks > s.all.missed) assert.ok(s.all.queueWaitP99Ms >= 0 && Number.isFinite(s.all.queueWaitP99Ms), `${s.alternative}: queueing p99`);
  }
  // Every alternative's ratio is over the best non-Headroom one's: that one's is 1 exactly.
  const ratios = result.highLoad.filter((s) => s.queueWaitP99OverBest !== undefined).map((s) => s.queueWaitP99OverBest!);
  if (ratios.length > 0)
    assert.ok(
      ratios.some((r) => Math.abs(r - 1) < 1e-9),
      `a best alternative: ${JSON.stringify(ratios)}`,
    );
  assert.ok(result.goals.length >= 4);
  // Judged (true or false), or a figure stated with no target: the end-to-end user-present wait in a spike.
  for (const goal of result.goals) assert.ok(typeof goal.met === 'boolean' || (goal.met === 'stated' && goal.target.startsWith('state it')), goal.name);
  assert.ok(result.goals.some((goal) => goal.name.includes('slot wait') && typeof goal.met === 'boolean'));
});
