import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { deleteKeysUnder, startPrivateRedis, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, LuaScripts, OverrideStore, connectRedis } from '../src/index';

async function connect(t: TestContext, url: string) {
  const redis = connectRedis(url);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('scripts');
  t.after(async () => {
    // The keys go through a connection of their own: the one under test may be stuck.
    redis.disconnect();
    const cleaner = new Redis(url);
    try {
      await deleteKeysUnder(cleaner, keyPrefix);
    } finally {
      cleaner.disconnect();
    }
  });
  return { redis, keyPrefix };
}

const worker = { workerId: 'w1', address: '127.0.0.1:1', capacity: 4, draining: false, heldLeaseIds: [], addressUnchanged: false };

test(
  'a Ledger and an OverrideStore made while the connection has commands in flight run their scripts (a command defined then would crash ioredis#1931)',
  { timeout: 10_000 },
  async (t) => {
    const { redis, keyPrefix } = await connect(t, testRedisUrl);
    // One auto-pipeline goes out and blocks the connection for 300 ms; the next waits behind it.
    const blocked = redis.blpop(`${keyPrefix}:never`, 0.3);
    await new Promise((resolve) => setImmediate(resolve));
    const waiting = redis.get(`${keyPrefix}:nothing`);
    // Made now, with a pipeline waiting: their script calls join that pipeline.
    const heartbeat = new Ledger(redis, { keyPrefix }).heartbeat('c', worker);
    const balancer = new OverrideStore(redis, keyPrefix).balancerHeartbeat('b1', {
      address: '127.0.0.1:2',
      queued: { userPresent: 0, background: 0 },
      trafficFlag: { enabled: false, candidateShare: 0 },
    });
    const [blpop, get, reply, override] = await Promise.all([blocked, waiting, heartbeat, balancer]);
    assert.equal(blpop, null);
    assert.equal(get, null);
    assert.deepEqual([reply.inflight, reply.drainRequested, reply.heartbeatScale], [0, false, 1], JSON.stringify(reply));
    assert.equal(override, undefined);
    assert.deepEqual(
      (await new Ledger(redis, { keyPrefix }).snapshot('c')).workers.map((w) => [w.workerId, w.capacity, w.freeSlots]),
      [['w1', 4, 4]],
    );
  },
);

test('a script Redis no longer holds (SCRIPT FLUSH, a restart) is sent whole once, then by its digest again', { timeout: 10_000 }, async (t) => {
  const server = await startPrivateRedis();
  const { redis, keyPrefix } = await connect(t, server.url);
  const counts = new Redis(server.url);
  // After hooks run in the order they were added: the connections close before the server stops.
  t.after(() => counts.disconnect());
  t.after(() => server.stop(true));
  const calls = async () => {
    const info = await counts.info('commandstats');
    const of = (command: string) => Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
    return { eval: of('eval'), evalsha: of('evalsha') };
  };
  const ledger = new Ledger(redis, { keyPrefix });

  await ledger.heartbeat('c', worker);
  const first = await calls();
  assert.equal(first.eval, 1, `new to this Redis: sent whole after NOSCRIPT ${JSON.stringify(first)}`);
  await ledger.heartbeat('c', worker);
  const second = await calls();
  assert.deepEqual(second, { eval: 1, evalsha: first.evalsha + 1 }, 'cached: by digest');

  await counts.script('FLUSH');
  await ledger.heartbeat('c', worker);
  assert.deepEqual(await calls(), { eval: 2, evalsha: second.evalsha + 1 }, 'flushed: NOSCRIPT, then whole again');
  assert.equal((await ledger.snapshot('c')).workers.length, 1);
});

test('a script name that is not in the directory is refused, naming the ones there', async () => {
  const redis = new Redis(testRedisUrl, { lazyConnect: true });
  await assert.rejects(LuaScripts.of().run(redis, 'no-such', []), /no Lua script named no-such \(there are: .*settle/);
});
