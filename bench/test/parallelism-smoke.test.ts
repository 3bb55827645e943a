/**
 * Keeps the parallelism benchmark from rotting: runs it in smoke mode (the bank simulator, a
 * worker at two levels, a second each) as its own process, as `npm run bench -- parallelism --smoke`
 * would, and checks the JSON it writes: each level measured on a worker of its own, every
 * integration of the mix present, the worker's runtime figures read. Never how fast.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { ParallelismResult } from '../src/parallelism';
import { runSmoke } from './smoke-run';

const timeoutMs = 60_000;

test('the parallelism benchmark runs end to end in smoke mode against the bank simulator', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<ParallelismResult>(t, 'parallelism', timeoutMs);

  assert.equal(result.benchmark, 'parallelism');
  assert.equal(result.mode, 'smoke');
  const { levels, repetitions, integrationMix } = result.settings;
  assert.deepEqual(
    result.runs.map((r) => r.maxParallelism),
    Array.from({ length: repetitions }, () => levels).flat(),
  );
  for (const r of result.runs) {
    const what = `N=${r.maxParallelism} #${r.repetition}`;
    // How many tasks a window completes depends on the machine: only that the figures were read.
    assert.ok(Number.isFinite(r.tasksPerSecond) && r.tasksPerSecond >= 0, `${what}: ${JSON.stringify(r)}`);
    for (const figure of [r.eventLoopUtilizationPercent, r.workerCpuPercentOfCore, r.heapUsedMaxMiB, r.gcPercentOfWall])
      assert.ok(Number.isFinite(figure) && figure >= 0, `${what}: ${JSON.stringify(r)}`);
  }
  assert.ok(
    result.runs.some((r) => r.latency.count > 0),
    'no task completed in any window',
  );
  assert.equal(result.levels.length, levels.length);
  assert.deepEqual(Object.keys(result.levels[0]!.byIntegration).sort(), integrationMix.map((entry) => entry.name).sort());
  assert.equal(result.goals.length, 0, 'smoke levels stop below N=30: no goal to judge');
});
