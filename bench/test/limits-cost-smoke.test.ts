/**
 * Keeps the limits-cost benchmark from rotting: runs it in smoke mode (a few hundred simulated
 * workers, one pair of runs) as its own process, as `npm run bench -- limits-cost --smoke` would,
 * and checks the JSON it writes: every variant ran, the one with limits did the work of keeping to
 * them (more hash commands per task: the limit, the integration's count), the ratio is finite.
 * Never a time against a target.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { LimitsCostResult } from '../src/limits-cost';
import { runSmoke } from './smoke-run';

const timeoutMs = 120_000;

const hashCommandsPerTask = (commands: Record<string, number>) => (commands.hget ?? 0) + (commands.hincrby ?? 0) + (commands.hmget ?? 0) + (commands.hset ?? 0);

test('the limits-cost benchmark runs every variant in smoke mode and compares them', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<LimitsCostResult>(t, 'limits-cost', timeoutMs);

  assert.equal(result.benchmark, 'limits-cost');
  assert.equal(result.mode, 'smoke');
  assert.deepEqual(
    result.runs.map((r) => r.variant),
    ['none', 'every'],
  );
  for (const run of result.runs) {
    assert.equal(run.lastError, null, JSON.stringify(run));
    assert.equal(run.loads.length, result.settings.fleetScale.tasksPerSecond.length);
    for (const load of run.loads) assert.ok(load.tasksPerSecond > 0 && Number.isFinite(load.perTaskUs), JSON.stringify(load));
  }
  const [without, withLimits] = result.runs.map((r) => r.loads[0]!.commandsPerTask);
  assert.ok(
    hashCommandsPerTask(withLimits!) > hashCommandsPerTask(without!),
    `with limits, settle and release read and count each task's integration: ${JSON.stringify({ without, withLimits })}`,
  );
  assert.equal(result.byRate.length, 1);
  assert.ok(Number.isFinite(result.byRate[0]!.ratio.median), JSON.stringify(result.byRate));
  // Part 1: every round ran every variant, batched (more than one task per settle call).
  assert.equal(result.settlePhases.length, 3 * result.settings.settle.rounds);
  for (const phase of result.settlePhases)
    assert.ok(phase.mainThreadCpuUsPerTask > 0 && phase.scriptUsPerTask > 0 && phase.tasksPerCall > 1, JSON.stringify(phase));
  assert.deepEqual(
    result.settle.map((c) => [c.variant, c.cpuRatioByRound.length]),
    [
      ['none', result.settings.settle.rounds],
      ['in-flight', result.settings.settle.rounds],
      ['in-flight-and-rate', result.settings.settle.rounds],
    ],
  );
  assert.equal(result.goals.length, 3);
});
