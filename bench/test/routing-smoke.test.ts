/**
 * Keeps the routing benchmark from rotting: runs it in smoke mode (two workers per cluster, one
 * balancer per policy, one short window per policy and load) as its own process, as
 * `npm run bench -- routing --smoke` would, and checks the JSON it writes: every policy measured,
 * the workers' own counts read, placements carried back, goals judged. Never how good.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { headroomPolicy, policies, type RoutingResult } from '../src/routing';
import { runSmoke } from './smoke-run';

const timeoutMs = 75_000;

test('the routing benchmark runs end to end in smoke mode and measures every policy', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<RoutingResult>(t, 'routing', timeoutMs);

  assert.equal(result.benchmark, 'routing');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.capacityTasksPerSecond > 0);
  const { repetitions, utilisations, workersPerCluster } = result.settings;
  assert.equal(result.windows.length, repetitions * utilisations.length * policies.length);
  assert.deepEqual(new Set(result.windows.map((w) => w.policy)), new Set(policies));
  for (const w of result.windows) {
    const what = `${w.policy} at ${w.utilisation}`;
    assert.ok(w.latency.count > 0 && w.latency.p50Ms > 0 && w.latency.p50Ms <= w.latency.p99Ms, `${what}: latency ${JSON.stringify(w.latency)}`);
    assert.ok(
      (w.latencyByPriority.USER_PRESENT?.count ?? 0) > 0 && (w.latencyByPriority.BACKGROUND?.count ?? 0) > 0,
      `${what}: both priorities ran: ${JSON.stringify(w.latencyByPriority)}`,
    );
    assert.equal(w.queued.tasks, w.latency.count, `${what}: every answer carried its placement`);
    assert.ok(w.workerLoad.samples > 0, `${what}: the workers were never read`);
    assert.equal(Object.keys(w.workerLoad.meanLoadByWorker).length, workersPerCluster, `${what}: ${JSON.stringify(w.workerLoad)}`);
    assert.ok(w.slowest.length > 0 && w.slowest[0]!.runMs > 0, `${what}: slow tasks traced: ${JSON.stringify(w.slowest)}`);
    // Headroom's workers refuse rather than queue.
    if (w.policy === headroomPolicy) assert.equal(w.queued.waitedInWorker, 0, `${what}: a task waited in a worker's queue`);
  }
  assert.equal(result.summaries.length, utilisations.length * policies.length);
  assert.ok(result.goals.length >= 1);
  for (const goal of result.goals) assert.equal(typeof goal.met, 'boolean');
});
