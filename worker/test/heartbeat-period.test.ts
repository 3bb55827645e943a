import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { deleteKeysUnder, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, clusterKeys, connectRedis } from '@headroom/fleet';
import { createWorker } from '../src/index';

test('a worker of a large cluster heartbeats as far apart as its ledger says, and closer again when the cluster shrinks', async (t) => {
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('heartbeat-period');
  // One worker beats at the full rate: a cluster of three beats every third period.
  const ledgerOptions = { keyPrefix, workersAtFullHeartbeatRate: 1 };
  const ledger = new Ledger(redis, ledgerOptions);
  for (const workerId of ['other1', 'other2']) {
    await ledger.heartbeat('c', { workerId, address: '127.0.0.1:1', capacity: 1, draining: false, heldLeaseIds: [] });
  }
  const worker = await createWorker(
    { cluster: 'c', workerId: 'w', heartbeatIntervalMs: 200 },
    { redis, handlers: { echo: async () => 'ok' }, ledger: ledgerOptions },
  );
  t.after(async () => {
    await worker.destroy();
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  /** The worker's heartbeat times (Redis's clock) seen over `ms`, and the median gap between them. */
  const medianGapMs = async (ms: number) => {
    const seen = new Set<number>();
    for (const until = Date.now() + ms; Date.now() < until;) {
      seen.add(Number(await redis.zscore(clusterKeys(keyPrefix, 'c').heartbeat, 'w')));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const times = [...seen].sort((a, b) => a - b);
    const gaps = times
      .slice(1)
      .map((time, i) => time - times[i]!)
      .sort((a, b) => a - b);
    assert.ok(gaps.length >= 2, `heartbeats seen: ${times.length}`);
    return gaps[Math.floor(gaps.length / 2)]!;
  };
  const spread = await medianGapMs(2500);
  assert.ok(spread >= 500 && spread <= 900, `3 workers, 1 at the full rate: every 600 ms, not 200 (median gap ${spread} ms)`);
  await ledger.deregister('c', 'other1');
  await ledger.deregister('c', 'other2');
  await new Promise((resolve) => setTimeout(resolve, 700)); // the heartbeat under way ends
  const alone = await medianGapMs(1500);
  assert.ok(alone >= 150 && alone <= 300, `alone: every 200 ms again (median gap ${alone} ms)`);
});
