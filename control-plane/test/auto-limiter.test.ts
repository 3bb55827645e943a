/**
 * The auto limiter on a real ledger in Redis: the latency it reads is what workers record, the
 * limit it writes is what the ledger's settle enforces. The clock is the test's (10 s ticks, one
 * latency slot each), so an incident of minutes runs in seconds.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { Registry, Counter, Gauge } from 'prom-client';
import { createLogger } from '@headroom/common';
import { Ledger, LatencyRecorder, connectRedis, controlKeys } from '@headroom/fleet';
import { deleteKeysUnder, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import type { NewAuditEntry } from '../src/record/audit-entry';
import { AutoLimiter, defaultAutoLimiterOptions, type AutoLimitEntry } from '../src/limits/auto-limiter';

const tickMs = 10_000;

async function setUp(t: TestContext, entries: AutoLimitEntry[], historyLength = 720) {
  const keyPrefix = uniquePrefix('auto-limit');
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const ledger = new Ledger(redis, { keyPrefix, keptForUserPresentShare: 0 });
  await ledger.heartbeat('baseline', { workerId: 'w1', address: '127.0.0.1:1', capacity: 64, draining: false, heldLeaseIds: [], dispatchGraceMs: 600_000 });
  const audited: NewAuditEntry[] = [];
  const registry = new Registry();
  const limiter = (name: string) =>
    new AutoLimiter({
      redis,
      keyPrefix,
      ledger,
      entries: () => Promise.resolve(entries),
      audit: { record: (entry) => Promise.resolve(void audited.push({ ...entry, target: `${entry.target} by ${name}` })) },
      metrics: {
        limitChanges: new Counter({ name: `changes_${name}`, help: 'h', labelNames: ['cluster', 'integration', 'reason'], registers: [registry] }),
        limitInFlight: new Gauge({ name: `limit_${name}`, help: 'h', labelNames: ['cluster', 'integration'], registers: [registry] }),
      },
      logger: createLogger('auto-limit-test', 'error'),
      options: { ...defaultAutoLimiterOptions, historyLength },
    });
  const recorder = new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' });
  const limiters = [limiter('first'), limiter('second')];
  t.after(async () => {
    for (const each of limiters) await each.close();
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  return { redis, keyPrefix, ledger, limiters, recorder, audited };
}

const limitOf = async (ledger: Ledger, integration: string) => (await ledger.integrationLimits('baseline')).find((s) => s.integration === integration)?.limit;

test('an incident: the limit falls to its minimum within 60 s, is back at its maximum within 60 s of the end; audited, kept, one actor', async (t) => {
  const entries: AutoLimitEntry[] = [{ cluster: 'baseline', integration: 'bank-a', setting: { minInFlight: 4, maxInFlight: 64 } }];
  const { ledger, limiters, recorder, audited } = await setUp(t, entries, 12);
  const [first, second] = limiters as [AutoLimiter, AutoLimiter];
  // Ten-second slots from a round start, so each tick reads its own slot and the one before.
  const t0 = Math.ceil(Date.now() / tickMs) * tickMs;
  const limits: number[] = [];
  const runTimeMsAt = (tick: number) => (tick >= 4 && tick < 10 ? 1000 : 100);
  for (let tick = 0; tick < 16; tick++) {
    const nowMs = t0 + tick * tickMs;
    for (let i = 0; i < 30; i++) recorder.record('bank-a', runTimeMsAt(tick), nowMs);
    await recorder.flush();
    await first.tick(nowMs + 1);
    await second.tick(nowMs + 1);
    const limit = await limitOf(ledger, 'bank-a');
    assert.ok(limit && 'maxInFlight' in limit, JSON.stringify(limit));
    limits.push(limit.maxInFlight);
  }
  // Ticks 4-9 are the incident (the window holds the slot before it too, so it shows a tick late).
  const settled = limits.findIndex((limit, tick) => tick >= 4 && limit === 4);
  assert.ok(settled !== -1 && (settled - 4) * tickMs <= 60_000, `limits by tick: ${limits.join(' ')}`);
  assert.equal(limits[9], 4, `limits by tick: ${limits.join(' ')}`);
  const back = limits.findIndex((limit, tick) => tick >= 10 && limit === 64);
  assert.ok(back !== -1 && (back - 10) * tickMs <= 60_000, `limits by tick: ${limits.join(' ')}`);
  // Each change once, by the first limiter alone (it holds the lease).
  const changes = limits.filter((limit, tick) => tick === 0 || limit !== limits[tick - 1]).length;
  assert.equal(audited.length, changes);
  assert.ok(
    audited.every((entry) => entry.actor === 'auto-limit' && entry.action === 'limit.auto' && entry.target === 'baseline/bank-a by first'),
    JSON.stringify(audited),
  );
  assert.match(
    audited.find((entry) => (entry.after as { maxInFlight: number }).maxInFlight === 32)!.reason!,
    /in trouble: run time p50 \d+ ms, baseline \d+ ms/,
  );
  // The history is capped, oldest first.
  const history = await first.history('baseline', 'bank-a');
  assert.equal(history.length, 12);
  assert.deepEqual(
    history.map((point) => point.limitInFlight),
    limits.slice(4),
  );
});

test('another control plane takes over when the holder closes, from the state in Redis', async (t) => {
  const entries: AutoLimitEntry[] = [{ cluster: 'baseline', integration: 'bank-b', setting: { minInFlight: 2, maxInFlight: 40 } }];
  const { redis, keyPrefix, ledger, limiters, recorder } = await setUp(t, entries);
  const [first, second] = limiters as [AutoLimiter, AutoLimiter];
  const t0 = Math.ceil(Date.now() / tickMs) * tickMs;
  const step = async (tick: number, runTimeMs: number, limiter: AutoLimiter) => {
    for (let i = 0; i < 30; i++) recorder.record('bank-b', runTimeMs, t0 + tick * tickMs);
    await recorder.flush();
    await limiter.tick(t0 + tick * tickMs + 1);
  };
  await step(0, 100, first);
  await step(1, 100, first);
  await step(2, 900, first);
  await step(3, 900, first);
  assert.deepEqual(await limitOf(ledger, 'bank-b'), { maxInFlight: 20 });
  await step(4, 900, second);
  assert.deepEqual(await limitOf(ledger, 'bank-b'), { maxInFlight: 20 }, 'the second does nothing while the first holds the lease');
  await first.close();
  await step(4, 900, second);
  assert.deepEqual(await limitOf(ledger, 'bank-b'), { maxInFlight: 10 }, 'it carried on from the state the first left');
  const state = JSON.parse((await redis.hget(controlKeys(keyPrefix).autoLimits, 'baseline|bank-b'))!) as { baselineMs: number };
  assert.ok(state.baselineMs < 150, `the baseline stood still in the trouble: ${state.baselineMs}`);
  await second.forget('baseline', 'bank-b');
  assert.equal(await redis.hget(controlKeys(keyPrefix).autoLimits, 'baseline|bank-b'), null);
  assert.deepEqual(await second.history('baseline', 'bank-b'), []);
});
