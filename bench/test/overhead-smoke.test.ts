/**
 * Keeps the overhead benchmark from rotting: runs it in smoke mode (seconds, tiny load) as
 * its own process, as `npm run bench -- overhead --smoke` would, and checks the JSON it writes.
 * It asserts that figures exist and are sane, never how good they are.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { LatencySummary } from '../src/report/histogram';
import type { OverheadResult } from '../src/overhead';
import { runSmoke } from './smoke-run';

const timeoutMs = 45_000;

function assertLatency(what: string, latency: LatencySummary): void {
  assert.ok(latency.count > 0, `${what}: no latencies recorded`);
  for (const field of ['p50Ms', 'p99Ms', 'maxMs'] as const) {
    assert.ok(Number.isFinite(latency[field]) && latency[field] > 0, `${what}: ${field} is ${latency[field]}`);
  }
  // A percentile is read from an HDR histogram (3 significant digits): it may pass the exact maximum by 0.1%.
  assert.ok(latency.p50Ms <= latency.p99Ms && latency.p99Ms <= latency.maxMs * 1.001, `${what}: percentiles out of order ${JSON.stringify(latency)}`);
}

test('the overhead benchmark runs end to end in smoke mode and writes sane JSON', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<OverheadResult>(t, 'overhead', timeoutMs);

  assert.equal(result.benchmark, 'overhead');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.machine.nproc >= 1);
  assert.ok(result.ceiling.balancerTasksPerSecond > 0, 'no throughput through the balancer');
  assert.ok(result.ceiling.directTasksPerSecond > 0, 'no throughput straight to the workers');
  for (const run of result.ceiling.runs) assertLatency(`ceiling ${run.target}`, run.latency);

  assert.ok(result.latency.length >= 1, 'no latency level measured');
  for (const level of result.latency) {
    assert.equal(level.repetitions.length, result.settings.latency.repetitions);
    for (const { direct, balancer } of level.repetitions) {
      assertLatency(`${level.label} direct`, direct.latency);
      assertLatency(`${level.label} balancer`, balancer.latency);
      assert.ok(direct.tasksPerSecond > 0 && balancer.tasksPerSecond > 0);
    }
    assert.ok(Number.isFinite(level.addedP50Ms.median) && Number.isFinite(level.addedP99Ms.median), 'added latency missing');
  }
  assert.deepEqual(
    result.goals.map((goal) => typeof goal.met),
    result.goals.map(() => 'boolean'),
  );
});
