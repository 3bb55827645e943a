import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { deleteKeysUnder, eventually, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { OverrideStore, connectRedis, overrideCovers, parseOverride, type OverrideState } from '../src/index';

async function openStore(t: import('node:test').TestContext) {
  const redis = connectRedis(testRedisUrl);
  const subscriber = connectRedis(testRedisUrl, { enableOfflineQueue: true, enableAutoPipelining: false });
  await Promise.all([new Promise((resolve) => redis.once('ready', resolve)), new Promise((resolve) => subscriber.once('ready', resolve))]);
  const keyPrefix = uniquePrefix('override');
  const store = new OverrideStore(redis, keyPrefix);
  t.after(async () => {
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
    subscriber.disconnect();
  });
  return { store, redis, subscriber };
}

test('override changes are versioned, published and combine per integration', async (t) => {
  const { store, subscriber } = await openStore(t);
  const published: OverrideState[] = [];
  subscriber.on('message', (_channel: string, message: string) => published.push(parseOverride(message)));
  await subscriber.subscribe(store.keys.overrideChangedChannel);
  assert.equal(await store.read(), undefined);

  const first = await store.change({ operation: 'rollback', integration: 'bank-b' }, 'alice');
  const second = await store.change({ operation: 'rollback', integration: 'bank-a' }, 'alice');
  assert.deepEqual(second.integrations, ['bank-a', 'bank-b']);
  assert.ok(second.version > first.version);
  assert.equal(overrideCovers(second, 'bank-a'), true);
  assert.equal(overrideCovers(second, 'bank-c'), false);

  const all = await store.change({ operation: 'rollback-all' }, 'bob');
  assert.equal(overrideCovers(all, 'bank-c'), true);
  assert.equal(all.actor, 'bob');
  const resumed = await store.change({ operation: 'resume-all' }, 'bob');
  assert.deepEqual([resumed.all, resumed.integrations], [false, ['bank-a', 'bank-b']]);
  const one = await store.change({ operation: 'resume', integration: 'bank-a' }, 'bob');
  assert.deepEqual(one.integrations, ['bank-b']);
  const none = await store.change({ operation: 'resume', integration: 'bank-b' }, 'bob');
  assert.deepEqual(none.integrations, []);
  assert.deepEqual(await store.read(), none);

  // Messages may trail the replies a little.
  await eventually('all six published', 2000, () => (published.length === 6 ? true : undefined));
  const versions = published.map((state) => state.version);
  assert.deepEqual(
    versions,
    [...versions].sort((a, b) => a - b),
  );
});

test('the version keeps growing after Redis lost the override', async (t) => {
  const { store, redis } = await openStore(t);
  let last = await store.change({ operation: 'rollback-all' }, 'a');
  for (let i = 0; i < 5; i++) {
    await redis.del(store.keys.override);
    const next = await store.change({ operation: 'set', all: true, integrations: ['x'] }, 'rebuild');
    assert.ok(next.version > last.version, `${next.version} > ${last.version}`);
    last = next;
  }
});

test('balancers register by heartbeat, acknowledge versions, and stale ones are forgotten', async (t) => {
  const { store, redis, subscriber } = await openStore(t);
  const acks: string[] = [];
  subscriber.on('message', (_channel: string, message: string) => acks.push(message));
  await subscriber.subscribe(store.keys.overrideAckedChannel);
  assert.equal(
    await store.balancerHeartbeat('b1', {
      address: '127.0.0.1:1',
      queued: { userPresent: 2, background: 40 },
      trafficFlag: { enabled: true, defaultPercent: 5, integrations: {} },
    }),
    undefined,
  );
  const state = await store.change({ operation: 'rollback-all' }, 'op');
  assert.deepEqual(await store.balancerHeartbeat('b2', { address: '127.0.0.1:2', queued: null, trafficFlag: null }), state);
  await store.acknowledge('b1', state.version);
  await eventually('the ack published', 2000, () => (acks.length === 1 ? true : undefined));

  const live = await store.liveBalancers(10_000);
  assert.deepEqual(
    live.map((b) => [b.balancerId, b.address, b.queued, b.trafficFlag, b.ack?.version]),
    [
      ['b1', '127.0.0.1:1', { userPresent: 2, background: 40 }, { enabled: true, defaultPercent: 5, integrations: {} }, state.version],
      ['b2', '127.0.0.1:2', null, null, undefined],
    ],
  );

  // b1 goes silent: 50 ms later it is no longer live, and its records are gone.
  await new Promise((resolve) => setTimeout(resolve, 60));
  await store.balancerHeartbeat('b2', { address: '127.0.0.1:2', queued: null, trafficFlag: null });
  assert.deepEqual(
    (await store.liveBalancers(40)).map((b) => b.balancerId),
    ['b2'],
  );
  assert.equal(await redis.hget(store.keys.acks, 'b1'), null);
  await store.leave('b2');
  assert.deepEqual(await store.liveBalancers(10_000), []);
});
