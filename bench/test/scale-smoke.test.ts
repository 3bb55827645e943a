/**
 * Keeps the scale benchmark from rotting: runs it in smoke mode (a private redis-server, a few
 * calls of each script, a tiny fleet) as its own process, as `npm run bench -- scale --smoke` would,
 * and checks the JSON it writes: every script and the fleet measured, the model filled in. Its
 * fleet-scale mode ran a few hundred simulated workers: checks what must hold whatever the timing
 * (tasks reserved and released, cost figures finite and positive, the ledger's counts in agreement
 * with the simulated fleet: free = capacity - in flight on every worker, with tasks running and
 * once every task ended), and that the load with everything real processes send besides the
 * ledger reached Redis. Never a time against a target.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { scriptNames, type ScaleResult } from '../src/scale';
import type { FleetScaleResult } from '../src/scale/fleet-scale';
import { runSmoke } from './smoke-run';

const timeoutMs = 120_000;

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
  checkFleetScale(result.fleetScale);
  assert.ok(
    result.goals.some((goal) => goal.name.startsWith('issue 14:')),
    JSON.stringify(result.goals.map((goal) => goal.name)),
  );
});

function checkFleetScale(result: FleetScaleResult): void {
  const { settings, run } = result;
  const what = JSON.stringify({ lastError: run.lastError, totals: run.totals });
  assert.equal(run.lastError, null, what);
  assert.equal(run.totals.errors, 0, what);
  assert.ok(run.totals.reserved > 0 && run.totals.releaseCalls > 0, what);
  assert.ok(run.totals.heartbeats >= settings.sim.workers, what);
  assert.ok(run.totals.sweeps > 0 && run.totals.directoryReads > 0, what);
  assert.equal(run.totals.workersRemoved, 0, `no live worker is swept: ${what}`);

  assert.ok(run.loads.length >= 1 && run.loads.length <= settings.tasksPerSecond.length, what);
  for (const load of run.loads) {
    assert.ok(
      load.windows.every((w) => w.sent.reserved > 0),
      `tasks reserved in every window: ${JSON.stringify(load.windows.map((w) => w.sent))}`,
    );
    assert.ok(Number.isFinite(load.perTaskUs.median) && load.perTaskUs.median > 0, `per task: ${JSON.stringify(load.perTaskUs)}`);
    assert.ok(load.redisCpuUsPerSecond.median > 0 && load.shareOfThread.median > 0);
    assert.ok((load.commandsPerTask.evalsha ?? 0) > 0, `a task runs scripts: ${JSON.stringify(load.commandsPerTask)}`);
  }
  assert.ok(Number.isFinite(run.perIdleWorkerSecondUs.median) && run.perIdleWorkerSecondUs.median > 0, JSON.stringify(run.perIdleWorkerSecondUs));
  assert.ok(Number.isFinite(run.perBusyWorkerSecondUs.median), JSON.stringify(run.perBusyWorkerSecondUs));
  assert.ok(Number.isFinite(run.tasksPerSecondAtPlannedShare), String(run.tasksPerSecondAtPlannedShare));

  checkWithOthers(run);
  checkConsistency(result);
}

/** The highest rate again with what real processes send besides the ledger: Redis saw it (commandstats), and the ledger's own loads did not carry it. */
function checkWithOthers(run: FleetScaleResult['run']): void {
  const others = run.withOthers;
  assert.ok(others, 'a load with the others too was measured');
  assert.equal(others.targetTasksPerSecond, run.loads.at(-1)!.targetTasksPerSecond);
  const sent = (key: 'reports' | 'latencyFlushes' | 'balancerHeartbeats') => others.windows.reduce((sum, w) => sum + w.sent[key], 0);
  assert.ok(sent('reports') > 0 && sent('latencyFlushes') > 0 && sent('balancerHeartbeats') > 0, JSON.stringify(others.windows.map((w) => w.sent)));
  const calls = (windows: typeof others.windows, command: string) => windows.reduce((sum, w) => sum + (w.commands[command]?.calls ?? 0), 0);
  // A call still under way when the last window closed may reach Redis after its accounting.
  const unanswered = others.windows.at(-1)!.othersUnderWayAtEnd;
  const what = JSON.stringify(others.windows.map((w) => ({ sent: w.sent, set: w.commands.set, exec: w.commands.exec, underWayAtEnd: w.othersUnderWayAtEnd })));
  assert.ok(calls(others.windows, 'set') >= sent('reports') - unanswered.reports, `every report reached Redis: ${what}`);
  assert.ok(
    calls(others.windows, 'exec') >= sent('latencyFlushes') - unanswered.latencyFlushes && calls(others.windows, 'hincrby') > 0,
    `every latency flush reached Redis: ${what}`,
  );
  for (const load of run.loads) assert.equal(calls(load.windows, 'exec'), 0, 'the ledger-alone loads send no latency summaries');
  assert.ok(others.shareOfThread.median > 0, JSON.stringify(others.shareOfThread));
}

/** The ledger agrees with the fleet: with tasks running, and once every task ended. */
function checkConsistency({ settings, run }: FleetScaleResult): void {
  const { whileRunning, afterAllEnded } = run.consistency;
  assert.equal(whileRunning.workers, settings.sim.workers);
  assert.ok(whileRunning.tasksRunning > 0, 'tasks were running at the first check');
  assert.equal(whileRunning.ledgerInflight, whileRunning.tasksRunning);
  assert.deepEqual(whileRunning.mismatches, []);
  assert.equal(afterAllEnded.workers, settings.sim.workers);
  assert.equal(afterAllEnded.tasksReserved, afterAllEnded.releasesSent);
  assert.equal(afterAllEnded.ledgerInflight, 0);
  assert.equal(afterAllEnded.totalCapacity, settings.sim.workers * settings.sim.slotsPerWorker);
  assert.equal(afterAllEnded.totalFree, afterAllEnded.totalCapacity);
  assert.deepEqual(afterAllEnded.mismatches, []);
}
