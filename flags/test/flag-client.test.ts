import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { eventually, freePort } from '@headroom/testkit';
import { parseParallelismPayload, startFlagClient } from '../src/index';

test('with no Unleash to reach, start gives up after its timeout: every task to the baseline, workers keep their own setting, metrics say so', async () => {
  const port = await freePort();
  const registry = new Registry();
  const startedAt = Date.now();
  const flags = await startFlagClient(
    { url: `http://127.0.0.1:${port}`, clientToken: 'x', appName: 'test', instanceId: 'test', refreshIntervalMs: 100, startTimeoutMs: 300 },
    { registry },
  );
  try {
    assert.ok(Date.now() - startedAt >= 290);
    assert.equal(flags.synchronized, false);
    assert.equal(flags.routesToCandidate('bank-a', 'k'), false);
    assert.equal(flags.maxParallelism('candidate'), undefined);
    assert.equal(flags.unreachable, true);
    // The HTTP client retries a refused connection for a few seconds before a fetch fails.
    const metrics = await eventually('a failed fetch counted', 15_000, async () => {
      const text = await registry.metrics();
      return /headroom_flags_fetch_failures_total [1-9]/.test(text) ? text : undefined;
    });
    assert.match(metrics, /headroom_flags_synchronized 0/);
    assert.match(metrics, /headroom_flags_unleash_reachable 0/);
    assert.match(metrics, /headroom_flags_seconds_since_fetch -1/);
    assert.equal(flags.routesToCandidate('bank-a', 'k'), false);
  } finally {
    flags.close();
  }
});

test('closing while a fetch is in flight does not end the process when that fetch fails later', async () => {
  const port = await freePort();
  const flags = await startFlagClient({ url: `http://127.0.0.1:${port}`, clientToken: 'x', appName: 'test', instanceId: 'test', startTimeoutMs: 100 });
  flags.close();
  // The refused connection is retried for a few seconds; then it fails with nobody listening.
  await new Promise((resolve) => setTimeout(resolve, 4000));
});

test('a max-parallelism payload is used only when it is {"maxParallelism": 1..10000}', () => {
  assert.deepEqual(parseParallelismPayload('{"maxParallelism": 30}'), { maxParallelism: 30 });
  for (const bad of ['{"maxParallelism": 0}', '{"maxParallelism": 10001}', '{"maxParallelism": 2.5}', '{"maxParallelism": "30"}', '{}', 'thirty', '[]']) {
    assert.equal(parseParallelismPayload(bad), undefined, bad);
  }
});
