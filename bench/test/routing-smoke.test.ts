/**
 * Keeps the routing benchmark from rotting: runs it in smoke mode (a 3-worker fleet, one short
 * window per policy) as its own process, as `npm run bench -- routing --smoke` would, and checks
 * the JSON it writes: every policy measured, in-flight counts read, goals judged. Never how good.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { policies, type RoutingResult } from '../src/routing';
import { runSmoke } from './smoke-run';

const timeoutMs = 60_000;

test('the routing benchmark runs end to end in smoke mode and measures every policy', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<RoutingResult>(t, 'routing', timeoutMs);

  assert.equal(result.benchmark, 'routing');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.capacityTasksPerSecond > 0);
  const { repetitions, utilisations } = result.settings;
  assert.equal(result.windows.length, repetitions * utilisations.length * policies.length);
  assert.deepEqual(new Set(result.windows.map((w) => w.policy)), new Set(policies));
  const workers = result.settings.fastWorkers.count + result.settings.slowWorkers.count;
  for (const w of result.windows) {
    const what = `${w.policy} at ${w.utilisation}`;
    assert.ok(w.latency.count > 0 && w.latency.p50Ms > 0 && w.latency.p50Ms <= w.latency.p99Ms, `${what}: latency ${JSON.stringify(w.latency)}`);
    assert.ok(w.inflight.samples > 0, `${what}: the ledger was never read`);
    assert.equal(Object.keys(w.inflight.meanByWorker).length, workers, `${what}: ${JSON.stringify(w.inflight)}`);
    assert.ok(w.slowWorkerTaskShare >= 0 && w.slowWorkerTaskShare <= 1, `${what}: slow share ${w.slowWorkerTaskShare}`);
  }
  assert.equal(result.summaries.length, utilisations.length * policies.length);
  assert.ok(result.goals.length >= 1);
  for (const goal of result.goals) assert.equal(typeof goal.met, 'boolean');
});
