/**
 * Keeps the overhead benchmark from rotting: runs it in smoke mode (seconds, tiny load) as
 * its own process, as `npm run bench -- overhead --smoke` would, and checks the JSON it writes.
 * It asserts that every path answered, that HAProxy balanced the calls over every worker, that
 * the proxyless client answered every call and left every slot of the ledger free, and that the
 * CPU figures exist and are sane, never how good they are.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { findHaproxy } from '../src/fleet/haproxy';
import type { LatencySummary } from '../src/report/histogram';
import type { Measurement, OverheadResult } from '../src/overhead';
import type { CpuGroup } from '../src/overhead-paths';
import { failedCalls } from '../src/report/stats';
import { runSmoke } from './smoke-run';

const timeoutMs = 50_000;

function assertLatency(what: string, latency: LatencySummary): void {
  assert.ok(latency.count > 0, `${what}: no latencies recorded`);
  for (const field of ['p50Ms', 'p99Ms', 'maxMs'] as const) {
    assert.ok(Number.isFinite(latency[field]) && latency[field] > 0, `${what}: ${field} is ${latency[field]}`);
  }
  // A percentile is read from an HDR histogram (3 significant digits): it may pass the exact maximum by 0.1%.
  assert.ok(latency.p50Ms <= latency.p99Ms && latency.p99Ms <= latency.maxMs * 1.001, `${what}: percentiles out of order ${JSON.stringify(latency)}`);
}

/** The processes a path's calls pass through, whose CPU time per task must be positive. */
const busyOn: Record<string, readonly CpuGroup[]> = {
  direct: ['generator', 'workers'],
  haproxy: ['generator', 'workers', 'haproxy'],
  balancer: ['generator', 'workers', 'balancer', 'redis'],
  // The client's routing work runs in the generator, its ledger calls in Redis.
  proxyless: ['generator', 'workers', 'redis'],
};
/** Paths that must answer every call even in the smoke: nothing on them may refuse at this load. */
const neverFail = new Set(['haproxy', 'proxyless']);

function assertCpu(what: string, m: Measurement, mustBePositive: boolean): void {
  assert.ok(m.cpu, `${what}: no CPU figures`);
  assert.ok(m.cpu.tasks > 0 && m.cpu.windowMs > 0, `${what}: CPU window ${JSON.stringify(m.cpu)}`);
  for (const group of busyOn[m.target] ?? []) {
    const micros = m.cpu.microsPerTask[group];
    assert.ok(micros !== undefined && Number.isFinite(micros) && micros >= 0, `${what}: ${group} CPU µs/task is ${micros}`);
    // 10 ms ticks: a short window at a low rate may read 0 for a light process, so only the closed-loop runs must be above 0.
    if (mustBePositive) assert.ok(micros > 0, `${what}: ${group} CPU µs/task is ${micros}`);
  }
}

test('the overhead benchmark runs every path end to end in smoke mode and writes sane JSON', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<OverheadResult>(t, 'overhead', timeoutMs);

  assert.equal(result.benchmark, 'overhead');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.machine.nproc >= 1);
  const expected = findHaproxy() ? ['direct', 'haproxy', 'balancer', 'proxyless'] : ['direct', 'balancer', 'proxyless'];
  assert.deepEqual(
    result.paths.map((path) => path.target),
    expected,
  );
  if (!findHaproxy()) assert.ok('skipped' in result.haproxy, 'haproxy is not installed, yet the result does not say its path was skipped');

  for (const target of expected) {
    const best = result.ceiling.best[target as keyof typeof result.ceiling.best];
    assert.ok(best && best.tasksPerSecond > 0, `no throughput on the ${target} path`);
  }
  for (const run of result.ceiling.runs) {
    assertLatency(`ceiling ${run.target}`, run.latency);
    assertCpu(`ceiling ${run.target}`, run, true);
    if (neverFail.has(run.target))
      assert.equal(failedCalls(run), 0, `ceiling ${run.target}: failed or dropped calls ${JSON.stringify(run.errorsByCode)}, dropped ${run.dropped}`);
    if (run.target === 'haproxy') {
      const requests = run.haproxyRequestsByServer ?? {};
      assert.equal(Object.keys(requests).length, result.settings.workerCount, `HAProxy's servers: ${JSON.stringify(requests)}`);
      for (const [server, count] of Object.entries(requests)) assert.ok(count > 0, `HAProxy sent no request to ${server}`);
      const sent = Object.values(requests).reduce((sum, n) => sum + n, 0);
      assert.ok(sent >= run.cpu!.tasks, `HAProxy sent ${sent} requests, fewer than the ${run.cpu!.tasks} tasks answered through it`);
    }
  }

  assert.ok(result.latency.length >= 1, 'no latency level measured');
  assert.equal(result.latency.filter((level) => level.isGoalLevel).length, 1, 'no goal level');
  for (const level of result.latency) {
    assert.equal(level.repetitions.length, result.settings.latency.repetitions);
    for (const measurements of level.repetitions) {
      assert.deepEqual(
        measurements.map((m) => m.target),
        expected,
      );
      for (const m of measurements) {
        assertLatency(`${level.label} ${m.target}`, m.latency);
        assert.ok(m.tasksPerSecond > 0, `${level.label} ${m.target}: no task answered`);
        assertCpu(`${level.label} ${m.target}`, m, false);
        if (neverFail.has(m.target))
          assert.equal(failedCalls(m), 0, `${level.label} ${m.target}: failed or dropped calls ${JSON.stringify(m.errorsByCode)}, dropped ${m.dropped}`);
      }
    }
    for (const path of level.paths.filter((p) => p.target !== 'direct')) {
      assert.ok(
        path.addedP50Ms && Number.isFinite(path.addedP50Ms.median) && path.addedP99Ms && Number.isFinite(path.addedP99Ms.median),
        `${path.target}: added latency missing`,
      );
    }
  }
  const capacity = result.settings.workerCount * result.settings.maxParallelismPerWorker;
  assert.deepEqual(
    [result.ledgerAtEnd.leases, result.ledgerAtEnd.totalFree, result.ledgerAtEnd.totalCapacity],
    [0, capacity, capacity],
    `the ledger after the run holds leases or misses slots: ${JSON.stringify(result.ledgerAtEnd)}`,
  );
  assert.ok(result.goals.length >= 4, `goals: ${JSON.stringify(result.goals)}`);
  for (const goal of result.goals) {
    assert.ok(typeof goal.met === 'boolean' || goal.met === 'stated', `${goal.name}: met is ${goal.met}`);
    assert.ok(Number.isFinite(goal.measured), `${goal.name}: measured is ${goal.measured}`);
  }
  assert.ok(
    result.goals.some((goal) => goal.name.startsWith('balancer CPU per task') && goal.measured > 0),
    'no balancer CPU per task goal',
  );
  assert.ok(
    result.goals.some((goal) => goal.name.startsWith('ceiling of the proxyless client') && goal.measured > 0),
    'no proxyless ceiling goal',
  );
});
