/**
 * Keeps the scale benchmark from rotting: runs it in smoke mode (a private redis-server, a few
 * calls of each script, a tiny fleet) as its own process, as `npm run bench -- scale --smoke` would,
 * and checks the JSON it writes: every script and the fleet measured, the model filled in.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { scriptNames, type ScaleResult } from '../src/scale';
import { runSmoke } from './smoke-run';

const timeoutMs = 60_000;

test('the scale benchmark runs end to end in smoke mode on a private Redis and fills in its model', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<ScaleResult>(t, 'scale', timeoutMs);

  assert.equal(result.benchmark, 'scale');
  assert.equal(result.mode, 'smoke');
  assert.deepEqual(
    result.scripts.map((s) => s.script),
    [...scriptNames],
  );
  for (const s of result.scripts) assert.ok(s.usecPerCall.median > 0 && s.mainThreadCpuUsPerCall.median > 0, JSON.stringify(s));
  assert.equal(result.fleetRuns.length, result.settings.fleet.repetitions);
  for (const m of result.fleetRuns) {
    assert.ok(m.tasksPerSecond > 0 && m.perTaskUs > 0, JSON.stringify(m));
    assert.ok((m.commandsPerTask.evalsha ?? 0) >= 1, `a task runs scripts: ${JSON.stringify(m.commandsPerTask)}`);
    assert.ok((m.commandsPerWorkerSecond.evalsha ?? 0) > 0, `an idle worker heartbeats: ${JSON.stringify(m.commandsPerWorkerSecond)}`);
  }
  assert.ok(result.capacity.length > 0);
  for (const row of result.capacity) assert.ok(Number.isFinite(row.plannedTasksPerSecond) && row.plannedTasksPerSecond >= 0, JSON.stringify(row));
});
