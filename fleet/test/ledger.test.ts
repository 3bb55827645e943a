import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { deleteKeysUnder, eventually, type RedisClusterNodes, startPrivateRedis, startRedisCluster, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, connectRedis, clusterKeys, type LedgerOptions } from '../src/index';

/**
 * Where the properties are proved: the shared Redis, or, with HEADROOM_TEST_REDIS=cluster (as
 * ledger-on-cluster.test.ts runs this file), a Redis Cluster of 3 primaries and their replicas of
 * this file's own.
 */
const onCluster = process.env.HEADROOM_TEST_REDIS === 'cluster';
let redisCluster: RedisClusterNodes | undefined;
before(async () => {
  if (onCluster) redisCluster = await startRedisCluster(3);
});
after(() => redisCluster?.stop());
const targetUrl = () => redisCluster?.url ?? testRedisUrl;

/**
 * A Redis the test may flush and whose commands it may count: a private redis-server, or on the
 * cluster the file's own (its tests run one at a time), flushed and counted on every primary.
 */
async function ownRedis(t: TestContext) {
  let urls: string[];
  if (redisCluster) {
    urls = redisCluster.nodes.map((node) => node.url);
  } else {
    const redis = await startPrivateRedis();
    t.after(() => redis.stop(true));
    urls = [redis.url];
  }
  const nodes = urls.map((url) => new Redis(url));
  t.after(() => nodes.forEach((node) => node.disconnect()));
  const primaries = async () => {
    const roles = await Promise.all(nodes.map((node) => node.role() as Promise<unknown[]>));
    return nodes.filter((_, i) => roles[i]![0] === 'master');
  };
  return {
    url: redisCluster?.url ?? urls[0]!,
    async flushAll() {
      for (const node of await primaries()) await node.flushall();
    },
    async resetStats() {
      for (const node of nodes) await node.config('RESETSTAT');
    },
    /** Calls per command since `resetStats`, on the primaries (a replica's are the copies it applies). */
    async commandCalls() {
      const calls = new Map<string, number>();
      for (const node of await primaries()) {
        for (const [, command, count] of (await node.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
          calls.set(command!, (calls.get(command!) ?? 0) + Number(count));
      }
      return calls;
    },
  };
}

async function openLedger(t: TestContext, options: LedgerOptions = {}, url = targetUrl()) {
  const redis = connectRedis(url);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = options.keyPrefix ?? uniquePrefix('ledger');
  const ledger = new Ledger(redis, { ...options, keyPrefix });
  t.after(async () => {
    try {
      await deleteKeysUnder(redis, keyPrefix);
    } catch {
      // A private Redis may be gone already (after hooks run in the order they were added),
      // and its keys with it.
    } finally {
      redis.disconnect();
    }
  });
  return ledger;
}

/**
 * A heartbeat of a worker that holds the leases `held`. Its other leases count while younger than
 * `dispatchGraceMs` (a minute unless a test is about dropping them: 0 drops every one it does not hold).
 */
async function addWorker(ledger: Ledger, cluster: string, workerId: string, capacity: number, held: readonly string[] = [], dispatchGraceMs = 60_000) {
  return ledger.heartbeat(cluster, {
    workerId,
    address: `127.0.0.1:${1000 + workerId.length}`,
    capacity,
    draining: false,
    heldLeaseIds: held,
    dispatchGraceMs,
  });
}

const user = { priority: 'user', balancerId: 'b1', waitIfNone: false } as const;
const background = { priority: 'background', balancerId: 'b1', waitIfNone: false } as const;

test('reserve takes the worker with the most free slots, exactly', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 3);
  await addWorker(ledger, 'c', 'w2', 5);
  await addWorker(ledger, 'c', 'w3', 2);
  const picks: string[] = [];
  for (let i = 0; i < 10; i++) {
    const r = await ledger.reserve('c', user);
    assert.ok(r.ok);
    // At each moment the chosen worker has the most free slots of all.
    const before = r.freeSlotsBefore;
    picks.push(`${r.workerId}:${before}`);
  }
  const frees = picks.map((p) => Number(p.split(':')[1]));
  assert.deepEqual(frees, [5, 4, 3, 3, 2, 2, 2, 1, 1, 1]);
  const snap = await ledger.snapshot('c');
  assert.deepEqual(
    snap.workers.map((w) => w.freeSlots),
    [0, 0, 0],
  );
  assert.equal(snap.totalFree, 0);
  assert.equal(snap.totalCapacity, 10);
  assert.deepEqual(await ledger.reserve('c', user), { ok: false, reason: 'full' });
});

test('a ledger of an earlier layout on the same prefix is neither read nor changed: two versions keep two ledgers', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  const prefix = ledger.options.keyPrefix;
  // What the layout before (version 1, unversioned key names) held: a worker with 29 of 30 slots
  // free, its score a fraction. Read as this layout reads a score, it would be a full worker.
  const old = (name: string) => `{${prefix}:c}:${name}`;
  await ledger.redis.zadd(old('free'), '29.5', 'w-old');
  await ledger.redis.hset(old('workers'), 'w-old', '30');
  await ledger.redis.hset(old('totals'), 'capacity', '30', 'free', '29');
  await ledger.redis.zadd(old('heartbeat'), String(Date.now()), 'w-old');
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'no-workers' });
  await addWorker(ledger, 'c', 'w-new', 2);
  const r = await ledger.reserve('c', background);
  assert.ok(r.ok && r.workerId === 'w-new', JSON.stringify(r));
  assert.ok(clusterKeys(prefix, 'c').free.startsWith(`{${prefix}:c}:l`), clusterKeys(prefix, 'c').free);
  // The earlier version's keys are as they were.
  assert.equal(await ledger.redis.zscore(old('free'), 'w-old'), '29.5');
  assert.deepEqual(await ledger.redis.hgetall(old('totals')), { capacity: '30', free: '29' });
  assert.equal(await ledger.redis.zscore(old('free'), 'w-new'), null);
});

test('concurrent reservations from 3 balancers never exceed any worker and stay least-loaded', async (t) => {
  const first = await openLedger(t, { keptForUserPresentShare: 0 });
  const others = [await openLedger(t, first.options), await openLedger(t, first.options)];
  const ledgers = [first, ...others];
  const capacities = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5];
  for (const [i, capacity] of capacities.entries()) await addWorker(first, 'c', `w${i}`, capacity);
  const total = capacities.reduce((a, b) => a + b, 0);
  // 3 x 20 requests in flight at once for 30 slots.
  const results = await Promise.all(Array.from({ length: 60 }, (_, i) => ledgers[i % 3]!.reserve('c', user)));
  const granted = results.filter((r) => r.ok);
  assert.equal(granted.length, total);
  const snap = await first.snapshot('c');
  for (const worker of snap.workers) assert.equal(worker.freeSlots, 0, `${worker.workerId} over- or under-admitted`);
  // Least-loaded at every moment: free-before values were non-increasing in commit order,
  // so every grant took a worker with at least as many free slots as any later grant.
  const granteds = granted.map((r) => (r.ok ? r.freeSlotsBefore : 0));
  assert.equal(Math.max(...granteds), 5);
  assert.equal(snap.leases, total);
});

test('ties are spread over all workers with the most free slots', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  for (let i = 0; i < 10; i++) await addWorker(ledger, 'c', `w${i}`, 4);
  const counts = new Map<string, number>();
  for (let i = 0; i < 400; i++) {
    const r = await ledger.reserve('c', user);
    assert.ok(r.ok);
    counts.set(r.workerId, (counts.get(r.workerId) ?? 0) + 1);
    await ledger.release('c', r.leaseId);
  }
  assert.equal(counts.size, 10, `only ${counts.size} of 10 tied workers chosen`);
  for (const [worker, count] of counts) assert.ok(count >= 15, `${worker} chosen ${count} of 400 times`);
});

test('a share of capacity is kept for user-present tasks', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0.1 });
  await addWorker(ledger, 'c', 'w1', 10);
  await addWorker(ledger, 'c', 'w2', 10);
  for (let i = 0; i < 18; i++) assert.ok((await ledger.reserve('c', background)).ok, `background ${i}`);
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'kept-for-user-present' });
  assert.ok((await ledger.reserve('c', user)).ok);
  assert.ok((await ledger.reserve('c', user)).ok);
  assert.deepEqual(await ledger.reserve('c', user), { ok: false, reason: 'full' });
});

test('the kept share never takes every slot of a small cluster', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0.1 });
  await addWorker(ledger, 'c', 'w1', 1);
  assert.ok((await ledger.reserve('c', background)).ok, 'a one-slot cluster runs background work');
  await addWorker(ledger, 'c', 'w2', 1);
  await addWorker(ledger, 'c', 'w3', 1);
  // 3 slots: ceil(0.3) = 1 kept; one of the two left is taken already.
  assert.ok((await ledger.reserve('c', background)).ok);
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'kept-for-user-present' });
  assert.ok((await ledger.reserve('c', user)).ok);
});

test('a user-present task waiting on any balancer holds back background tasks on all', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 1);
  const held = await ledger.reserve('c', user);
  assert.ok(held.ok);
  // Balancer b2 has a user-present task that finds no slot and waits.
  assert.deepEqual(await ledger.reserve('c', { priority: 'user', balancerId: 'b2', waitIfNone: true }), { ok: false, reason: 'full' });
  await ledger.release('c', held.leaseId);
  // The slot is free, but background work on balancer b1 must not take it.
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'user-present-waiting' });
  const served = await ledger.reserve('c', { priority: 'user', balancerId: 'b2', waitIfNone: false });
  assert.ok(served.ok);
  await ledger.release('c', served.leaseId);
  await ledger.stopWaiting('c', 'b2', 'all');
  assert.ok((await ledger.reserve('c', background)).ok);
});

test('freed slots are announced only while a balancer waits', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  const subscriber = connectRedis(targetUrl(), { enableOfflineQueue: true });
  t.after(() => subscriber.disconnect());
  const channel = ledger.keys('c').slotFreedChannel;
  await subscriber.subscribe(channel);
  const messages: string[] = [];
  subscriber.on('message', (_channel: string, worker: string) => messages.push(worker));
  await addWorker(ledger, 'c', 'w1', 1);
  const a = await ledger.reserve('c', user);
  assert.ok(a.ok);
  await ledger.release('c', a.leaseId);
  const b = await ledger.reserve('c', user);
  assert.ok(b.ok);
  assert.deepEqual(await ledger.reserve('c', { ...user, waitIfNone: true }), { ok: false, reason: 'full' });
  await ledger.release('c', b.leaseId);
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.deepEqual(messages, ['w1']);
});

test('release is idempotent and a drained worker takes nothing new', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  await addWorker(ledger, 'c', 'w2', 2);
  const r = await ledger.reserve('c', { ...user, targetWorkerId: 'w1' });
  assert.ok(r.ok && r.workerId === 'w1');
  assert.equal(await ledger.release('c', r.leaseId), true);
  assert.equal(await ledger.release('c', r.leaseId), false);
  assert.equal((await ledger.snapshot('c')).workers[0]!.freeSlots, 2);
  assert.equal(await ledger.drain('c', 'w1'), true);
  for (let i = 0; i < 2; i++) {
    const x = await ledger.reserve('c', user);
    assert.ok(x.ok && x.workerId === 'w2');
  }
  assert.deepEqual(await ledger.reserve('c', user), { ok: false, reason: 'full' });
  const hb = await addWorker(ledger, 'c', 'w1', 2);
  assert.equal(hb.drainRequested, true, 'the worker learns of the drain at its next heartbeat');
  assert.equal(await ledger.deregister('c', 'w1'), true);
  const snap = await ledger.snapshot('c');
  assert.deepEqual(
    snap.workers.map((w) => w.workerId),
    ['w2'],
  );
  assert.equal(snap.totalCapacity, 2);
});

test('raising capacity frees slots at once; lowering it lets running tasks finish', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  const leases = [];
  for (let i = 0; i < 2; i++) {
    const r = await ledger.reserve('c', user);
    assert.ok(r.ok);
    leases.push(r.leaseId);
  }
  await addWorker(ledger, 'c', 'w1', 4, leases);
  let snap = await ledger.snapshot('c');
  assert.equal(snap.workers[0]!.freeSlots, 2);
  assert.equal(snap.totalFree, 2);
  await addWorker(ledger, 'c', 'w1', 1, leases);
  snap = await ledger.snapshot('c');
  assert.equal(snap.workers[0]!.freeSlots, -1);
  assert.equal(snap.totalFree, 0, 'a worker over its new capacity counts as 0 free, not negative');
  assert.deepEqual(await ledger.reserve('c', user), { ok: false, reason: 'full' });
  await ledger.release('c', leases[0]!);
  await ledger.release('c', leases[1]!);
  snap = await ledger.snapshot('c');
  assert.equal(snap.workers[0]!.freeSlots, 1);
  assert.equal(snap.totalFree, 1);
});

test('a large cluster spreads its heartbeats out: the period and the sweep timeout grow with its size past workersAtFullHeartbeatRate', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0, workersAtFullHeartbeatRate: 2 });
  assert.equal((await addWorker(ledger, 'c', 'w1', 1)).heartbeatScale, 1);
  assert.equal((await addWorker(ledger, 'c', 'w2', 1)).heartbeatScale, 1);
  await addWorker(ledger, 'c', 'w3', 1);
  assert.equal((await addWorker(ledger, 'c', 'w4', 1)).heartbeatScale, 2, '4 workers where 2 beat at the full rate: every other period');
  // Their period is twice the configured one, so is the sweep's timeout: 1 s becomes 2 s.
  await new Promise((resolve) => setTimeout(resolve, 1100));
  assert.deepEqual(await ledger.sweep('c', 1000), { workersRemoved: 0 }, 'silent 1.1 s, within the scaled timeout');
  await new Promise((resolve) => setTimeout(resolve, 1100));
  assert.deepEqual(await ledger.sweep('c', 1000), { workersRemoved: 4 }, 'silent 2.2 s, past it');
});

test('sweep removes silent workers with their leases', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  await addWorker(ledger, 'c', 'w2', 2);
  const onW2 = await ledger.reserve('c', { ...user, targetWorkerId: 'w2' });
  assert.ok(onW2.ok);
  await new Promise((resolve) => setTimeout(resolve, 300));
  await addWorker(ledger, 'c', 'w1', 2); // w1 is alive; w2 fell silent 300 ms ago
  assert.deepEqual(await ledger.sweep('c', 250), { workersRemoved: 1 });
  const snap = await ledger.snapshot('c');
  assert.deepEqual(
    snap.workers.map((w) => [w.workerId, w.freeSlots]),
    [['w1', 2]],
  );
  assert.deepEqual([snap.totalCapacity, snap.totalFree, snap.leases], [2, 2, 0]);
  assert.equal(await ledger.release('c', onW2.leaseId), false, 'its lease left with it');
  assert.equal(await ledger.redis.exists(`${clusterKeys(ledger.options.keyPrefix, 'c').leasesPrefix}w2`), 0, 'and its lease records');
});

test('a lease nobody holds nor releases (its balancer died before dispatching it) is kept while it may be on its way, then dropped by the next heartbeat', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 4);
  const lost = await ledger.reserve('c', user);
  const dispatched = await ledger.reserve('c', user);
  assert.ok(lost.ok && dispatched.ok);
  // The worker holds one; the other may still be on its way.
  assert.deepEqual(await addWorker(ledger, 'c', 'w1', 4, [dispatched.leaseId]).then((r) => [r.inflight, r.leasesDropped]), [2, 0]);
  // Past the grace, only what the worker holds counts: exactly the lost lease is dropped.
  assert.deepEqual(await addWorker(ledger, 'c', 'w1', 4, [dispatched.leaseId], 0).then((r) => [r.inflight, r.leasesDropped, r.leasesRestored]), [1, 1, 0]);
  let snap = await ledger.snapshot('c');
  assert.deepEqual([snap.workers[0]!.freeSlots, snap.totalFree, snap.leases], [3, 3, 1]);
  // A late release of the dropped lease frees nothing twice; the held one's release frees its slot at once.
  assert.equal(await ledger.release('c', lost.leaseId), false);
  assert.equal(await ledger.release('c', dispatched.leaseId), true);
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.workers[0]!.freeSlots, snap.totalFree, snap.leases], [4, 4, 0]);
  assert.equal((await addWorker(ledger, 'c', 'w1', 4, [], 0)).inflight, 0);
});

test('a lease released after a heartbeat dropped it frees nothing twice: free slots never pass capacity', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  const slow = await ledger.reserve('c', user);
  assert.ok(slow.ok);
  // It takes longer than the grace to arrive: dropped from the count.
  assert.equal((await addWorker(ledger, 'c', 'w1', 2, [], 0)).leasesDropped, 1);
  assert.deepEqual([(await ledger.snapshot('c')).workers[0]!.freeSlots, (await ledger.snapshot('c')).totalFree], [2, 2]);
  // Then it arrives, runs, and is released: the count was settled already.
  await ledger.release('c', slow.leaseId);
  const snap = await ledger.snapshot('c');
  assert.deepEqual([snap.workers[0]!.freeSlots, snap.workers[0]!.inflight, snap.totalFree], [2, 0, 2]);
  assert.deepEqual(await ledger.reserve('c', { ...user, targetWorkerId: 'w1' }).then((r) => r.ok && r.freeSlotsBefore), 2);
});

test('under continuous load, answers whose releases never came are dropped at the next heartbeat, whatever else the worker answers', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  const dispatchGraceMs = 30;
  await addWorker(ledger, 'c', 'w1', 8, [], dispatchGraceMs);
  const held: string[] = [];
  for (let round = 1; round <= 6; round++) {
    // Three tasks a round: two answered and released, one answered as its deadline passed at the
    // balancer (nobody releases it); the worker holds the tasks of this round until the next.
    const next: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await ledger.reserve('c', user);
      assert.ok(r.ok, `round ${round}: ${JSON.stringify(r)}`);
      next.push(r.leaseId);
    }
    for (const [i, lease] of held.entries()) if (i < 2) assert.equal(await ledger.release('c', lease), true);
    held.splice(0, held.length, ...next);
    await new Promise((resolve) => setTimeout(resolve, dispatchGraceMs + 5));
    const reply = await addWorker(ledger, 'c', 'w1', 8, held, dispatchGraceMs);
    assert.deepEqual(
      [reply.inflight, reply.leasesDropped],
      [3, round === 1 ? 0 : 1],
      `round ${round}: the ledger counts what the worker holds, and drops the one unreleased answer`,
    );
  }
  assert.equal((await ledger.snapshot('c')).totalFree, 5);
});

test('a heartbeat costs a few commands whatever the worker runs, and a lease costs O(1): Redis counts the commands', async (t) => {
  const redis = await ownRedis(t);
  const ledger = await openLedger(t, { keptForUserPresentShare: 0.1 }, redis.url);
  for (let i = 0; i < 50; i++) await addWorker(ledger, 'c', `w${i}`, 30);
  const leases: string[] = [];
  for (let i = 0; i < 30 * 50 - 200; i++) {
    const r = await ledger.reserve('c', user);
    assert.ok(r.ok);
    leases.push(r.leaseId);
  }
  const seen: string[] = [];
  /** Commands Redis ran inside the scripts `fn` called. */
  const commandsFor = async (fn: () => Promise<unknown>) => {
    await redis.resetStats();
    await fn();
    let calls = 0;
    const counted: string[] = [];
    for (const [command, count] of await redis.commandCalls()) {
      // Not the calls themselves, nor what this test or a cluster client asks (its slot map), nor
      // a replica's acknowledgements to its primary (REPLCONF ACK, every second, on the cluster).
      if (!['evalsha', 'eval', 'info', 'role', 'replconf'].includes(command) && !command.startsWith('config') && !command.startsWith('cluster')) {
        calls += count;
        counted.push(`${command} ${count}`);
      }
    }
    seen.push(counted.join(', '));
    return calls;
  };
  const idleHeartbeat = await commandsFor(() => addWorker(ledger, 'c', 'w49', 30));
  const busyHeartbeat = await commandsFor(() =>
    addWorker(
      ledger,
      'c',
      'w0',
      30,
      leases.filter((lease) => lease.startsWith('w0|')),
    ),
  );
  // A count that changes costs a few writes; the worker's leases are read in one command.
  assert.ok(busyHeartbeat <= idleHeartbeat + 4, `a heartbeat of a worker running 30 tasks ran ${busyHeartbeat} commands, an idle one ${idleHeartbeat}`);
  assert.ok(idleHeartbeat <= 7 && busyHeartbeat <= 9, `heartbeats: ${idleHeartbeat} (idle), ${busyHeartbeat} (busy) commands: ${seen.join('; ')}`);
  // A worker whose previous heartbeat got through does not have its address read again: TIME, its
  // capacity and score, its leases, its heartbeat time and the cluster's size.
  await addWorker(ledger, 'c', 'w50', 30);
  const steadyHeartbeat = await commandsFor(() =>
    ledger.heartbeat('c', {
      workerId: 'w50',
      address: `127.0.0.1:${1000 + 'w50'.length}`,
      capacity: 30,
      draining: false,
      heldLeaseIds: [],
      addressUnchanged: true,
    }),
  );
  assert.ok(steadyHeartbeat <= idleHeartbeat - 1 && steadyHeartbeat <= 6, `a steady heartbeat: ${steadyHeartbeat} commands`);
  const userReserve = await commandsFor(() => ledger.reserve('c', user));
  const backgroundReserve = await commandsFor(() => ledger.reserve('c', background));
  const release = await commandsFor(() => ledger.release('c', leases.pop()!));
  assert.ok(userReserve <= 8, `user-present reserve: ${userReserve} commands`);
  assert.ok(backgroundReserve <= 10, `background reserve: ${backgroundReserve} commands`);
  assert.ok(release <= 7, `release: ${release} commands`);
  // In a batch, what a call costs is paid once: 16 background reservations and 16 releases in one call.
  const callsBefore = ledger.settleCounts.calls;
  const batch = await commandsFor(() =>
    Promise.all([...Array.from({ length: 16 }, () => ledger.reserve('c', background)), ...leases.splice(-16).map((lease) => ledger.release('c', lease))]),
  );
  assert.equal(ledger.settleCounts.calls - callsBefore, 1, 'one call to Redis for the batch');
  assert.ok(batch / 16 <= 9, `a reservation and a release in a batch of 16 each: ${batch / 16} commands`);
  // With the directory read (as a balancer keeps it), a batch reads its version once instead of an address per reservation.
  await ledger.addressesIfChanged('c', undefined);
  const knownDirectoryBatch = await commandsFor(() =>
    Promise.all([...Array.from({ length: 16 }, () => ledger.reserve('c', background)), ...leases.splice(-16).map((lease) => ledger.release('c', lease))]),
  );
  assert.ok(
    knownDirectoryBatch <= batch - 14,
    `a batch of 16 reservations and 16 releases: ${knownDirectoryBatch} commands with the directory known, ${batch} without`,
  );
});

test('a reservation answers with the address of the directory this process read, unless a worker joined or moved since', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 1);
  const read = await ledger.addressesIfChanged('c', undefined);
  assert.ok(read.changed);
  // The version is current, so the script leaves the address out and the ledger fills it in
  // from the directory it read: a write that bypassed the version does not show.
  await ledger.redis.hset(clusterKeys(ledger.options.keyPrefix, 'c').address, 'w1', '127.0.0.1:1');
  const known = await ledger.reserve('c', user);
  assert.ok(known.ok);
  assert.equal(known.address, '127.0.0.1:1002');
  await ledger.release('c', known.leaseId);
  // A worker that moves changes the version: the script answers with the address it holds.
  await ledger.heartbeat('c', { workerId: 'w1', address: '127.0.0.1:7', capacity: 1, draining: false, heldLeaseIds: [] });
  const moved = await ledger.reserve('c', user);
  assert.ok(moved.ok);
  assert.equal(moved.address, '127.0.0.1:7');
  await ledger.release('c', moved.leaseId);
  // So does one that joins after the read.
  await addWorker(ledger, 'c', 'w22', 5);
  const joined = await ledger.reserve('c', user);
  assert.ok(joined.ok && joined.workerId === 'w22');
  assert.equal(joined.address, '127.0.0.1:1003');
});

test('after FLUSHALL, heartbeats rebuild the ledger with the tasks still running', async (t) => {
  const redis = await ownRedis(t);
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 }, redis.url);
  await addWorker(ledger, 'c', 'w1', 4);
  const running = await ledger.reserve('c', user);
  assert.ok(running.ok);
  await redis.flushAll();
  assert.equal((await ledger.snapshot('c')).workers.length, 0);
  assert.equal((await addWorker(ledger, 'c', 'w1', 4, [running.leaseId])).leasesRestored, 1);
  const snap = await ledger.snapshot('c');
  assert.equal(snap.workers[0]!.freeSlots, 3);
  assert.equal(snap.totalFree, 3);
  // The worker's heartbeat wrote the lease back: its release frees the slot as usual.
  assert.equal(await ledger.release('c', running.leaseId), true);
  assert.equal((await ledger.snapshot('c')).totalFree, 4);
});

test('every script runs on Redis Cluster: all its keys hash to one slot', async (t) => {
  const redis = await startPrivateRedis(['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${process.pid}-${Date.now()}.conf`]);
  t.after(() => redis.stop(true));
  const admin = new Redis(redis.url);
  t.after(() => admin.disconnect());
  await admin.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
  await eventually('cluster state ok', 5000, async () => ((await admin.call('CLUSTER', 'INFO')) as string).includes('cluster_state:ok') || undefined);
  // A script touching keys of two slots fails with CROSSSLOT on a cluster node.
  const ledger = await openLedger(t, { keptForUserPresentShare: 0.1 }, redis.url);
  const slots = new Set(await Promise.all(clusterKeys(ledger.options.keyPrefix, 'c').all.map((k) => admin.call('CLUSTER', 'KEYSLOT', k))));
  assert.equal(slots.size, 1);
  await addWorker(ledger, 'c', 'w1', 3);
  const r = await ledger.reserve('c', user);
  assert.ok(r.ok);
  assert.equal(await ledger.release('c', r.leaseId), true);
  assert.equal(await ledger.drain('c', 'w1'), true);
  assert.equal((await ledger.markUnreachable('c', 'w1', 1000, 1)).result, 'marked');
  assert.equal(await ledger.clearUnreachable('c', 'w1'), true);
  assert.deepEqual(await ledger.sweep('c', 60_000), { workersRemoved: 0 });
  assert.equal((await ledger.addressesIfChanged('c', undefined)).changed, true);
  assert.equal(await ledger.deregister('c', 'w1'), true);
});

test('a worker swept while it still runs tasks comes back with them counted', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 5);
  const running = [];
  for (let i = 0; i < 3; i++) {
    const r = await ledger.reserve('c', user);
    assert.ok(r.ok);
    running.push(r.leaseId);
  }
  // Its event loop was blocked: no heartbeat for longer than the timeout.
  await new Promise((resolve) => setTimeout(resolve, 60));
  assert.deepEqual(await ledger.sweep('c', 50), { workersRemoved: 1 });
  assert.equal((await ledger.snapshot('c')).leases, 0, 'its leases left with it');
  // It recovers and heartbeats with the 3 tasks it still runs.
  const reply = await addWorker(ledger, 'c', 'w1', 5, running);
  assert.deepEqual([reply.inflight, reply.leasesRestored], [3, 3]);
  let snap = await ledger.snapshot('c');
  assert.deepEqual([snap.workers[0]!.freeSlots, snap.totalFree, snap.leases], [2, 2, 3]);
  // Written back, they are released as usual.
  for (const lease of running) assert.equal(await ledger.release('c', lease), true);
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.workers[0]!.freeSlots, snap.totalFree, snap.leases], [5, 5, 0]);
});

test('a heartbeat settles the count: leases on their way count, released ones do not, and what the worker holds always does', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 4);
  const arrived = await ledger.reserve('c', user);
  const onItsWay = await ledger.reserve('c', user);
  assert.ok(arrived.ok && onItsWay.ok);
  assert.equal((await addWorker(ledger, 'c', 'w1', 4, [arrived.leaseId])).inflight, 2);
  await ledger.release('c', arrived.leaseId);
  await ledger.release('c', onItsWay.leaseId);
  assert.equal((await addWorker(ledger, 'c', 'w1', 4, [], 0)).inflight, 0);
  assert.equal((await ledger.snapshot('c')).totalFree, 4);
  // Leases of another worker, or not from the ledger, are not this worker's to count.
  assert.equal((await addWorker(ledger, 'c', 'w1', 4, ['w2|x', 'own-id'], 0)).inflight, 0);
});

test('the snapshot says what each worker held at its last heartbeat, so the drift of the count shows until heartbeats settle it', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  const keys = clusterKeys(ledger.options.keyPrefix, 'c');
  await addWorker(ledger, 'c', 'w1', 3);
  const held = (snapshot: Awaited<ReturnType<Ledger['snapshot']>>) => snapshot.workers.map((w) => [w.workerId, w.inflight, w.heldAtHeartbeat]);
  assert.deepEqual(held(await ledger.snapshot('c')), [['w1', 0, 0]]);
  const running = await ledger.reserve('c', user);
  const onItsWay = await ledger.reserve('c', user);
  assert.ok(running.ok && onItsWay.ok);
  await addWorker(ledger, 'c', 'w1', 3, [running.leaseId]);
  assert.deepEqual(held(await ledger.snapshot('c')), [['w1', 2, 1]], 'a lease on its way counts, the worker holds one');
  // A lease record the worker does not hold (as a lost release leaves): counted from the next
  // heartbeat while it may still be on its way, dropped by the first one past the grace.
  await ledger.redis.hset(`${keys.leasesPrefix}w1`, 'ghost', String(Date.now()));
  await addWorker(ledger, 'c', 'w1', 3, [running.leaseId, onItsWay.leaseId]);
  assert.deepEqual(held(await ledger.snapshot('c')), [['w1', 3, 2]]);
  await addWorker(ledger, 'c', 'w1', 3, [running.leaseId, onItsWay.leaseId], 0);
  assert.deepEqual(held(await ledger.snapshot('c')), [['w1', 2, 2]]);
  // The held count lives beside the capacity; a worker that leaves takes it with it.
  assert.equal(await ledger.redis.hget(keys.workers, 'w1|held'), '2');
  assert.equal(await ledger.deregister('c', 'w1'), true);
  assert.deepEqual(await ledger.redis.hgetall(keys.workers), {});
});

test('a release that reaches Redis before the heartbeat that still held its lease: counted again for one period at most', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 4);
  const a = await ledger.reserve('c', user);
  assert.ok(a.ok);
  // The worker's heartbeat, sent just before it answered, arrives after the balancer's release:
  // the lease is written back, dated so that the next heartbeat drops it.
  assert.equal(await ledger.release('c', a.leaseId), true);
  assert.deepEqual(await addWorker(ledger, 'c', 'w1', 4, [a.leaseId]).then((r) => [r.inflight, r.leasesRestored]), [1, 1]);
  assert.deepEqual(
    await addWorker(ledger, 'c', 'w1', 4, []).then((r) => [r.inflight, r.leasesDropped]),
    [0, 1],
    'dropped at the next heartbeat, even within the grace',
  );
  assert.equal((await ledger.snapshot('c')).totalFree, 4);
});

test("a worker started again under the same id: the old process's leases go at its first heartbeat past the grace, the new ones stay", async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 3);
  const old = await ledger.reserve('c', user);
  assert.ok(old.ok);
  // The old process was killed while it ran the task; the new one holds nothing of it.
  const fresh = await ledger.reserve('c', user);
  assert.ok(fresh.ok);
  assert.deepEqual(await addWorker(ledger, 'c', 'w1', 3, [fresh.leaseId], 0).then((r) => [r.inflight, r.leasesDropped]), [1, 1]);
  assert.equal(await ledger.release('c', old.leaseId), false, 'the old lease was dropped: its release frees nothing');
  assert.equal(await ledger.release('c', fresh.leaseId), true);
  assert.equal((await ledger.snapshot('c')).totalFree, 3);
});

test('reservations and releases made in the same turn go to Redis in one call, in the order asked', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  await addWorker(ledger, 'c', 'w2', 2);
  const first = await Promise.all([ledger.reserve('c', user), ledger.reserve('c', user), ledger.reserve('c', user), ledger.reserve('c', user)]);
  assert.ok(first.every((r) => r.ok));
  const callsBefore = ledger.settleCounts.calls;
  // Full: a fifth reservation gets a slot only because a release in its batch freed one first.
  const [released, fifth, sixth] = await Promise.all([
    ledger.release('c', (first[0] as { leaseId: string }).leaseId),
    ledger.reserve('c', user),
    ledger.reserve('c', user),
  ]);
  assert.equal(ledger.settleCounts.calls - callsBefore, 1);
  assert.equal(released, true);
  assert.ok(fifth.ok && fifth.workerId === (first[0] as { workerId: string }).workerId);
  assert.deepEqual(sixth, { ok: false, reason: 'full' });
});

test('in one batch, workers tied again after each took a slot keep their turn', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  // Registered in this order, so w-a has waited longest; names in the reverse order of the turn
  // would win a tie on equal scores (a sorted set orders those by name).
  for (const workerId of ['w-a', 'w-b', 'w-c']) await addWorker(ledger, 'c', workerId, 2);
  const callsBefore = ledger.settleCounts.calls;
  const picks = await Promise.all(Array.from({ length: 6 }, () => ledger.reserve('c', user)));
  assert.equal(ledger.settleCounts.calls - callsBefore, 1, 'one call for the batch');
  assert.deepEqual(
    picks.map((r) => (r.ok ? `${r.workerId}:${r.freeSlotsBefore}` : r.reason)),
    ['w-a:2', 'w-b:2', 'w-c:2', 'w-a:1', 'w-b:1', 'w-c:1'],
  );
});

test('in one batch, a user-present reservation that must wait holds back the background ones after it', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 1);
  await addWorker(ledger, 'c', 'w2', 3);
  assert.ok((await ledger.reserve('c', { ...user, targetWorkerId: 'w1' })).ok);
  const [before, targeted, after] = await Promise.all([
    ledger.reserve('c', { ...background, waitIfNone: true }),
    ledger.reserve('c', { ...user, waitIfNone: true, targetWorkerId: 'w1' }),
    ledger.reserve('c', { ...background, waitIfNone: true }),
  ]);
  assert.ok(before.ok && before.workerId === 'w2');
  assert.deepEqual(targeted, { ok: false, reason: 'target-full' });
  assert.deepEqual(after, { ok: false, reason: 'user-present-waiting' });
  assert.equal((await ledger.snapshot('c')).workers.find((w) => w.workerId === 'w2')!.freeSlots, 2);
});

test('background tasks are held back while any user-present waiter is current, and no longer once the last stopped or expired', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0, waiterTtlMs: 1_500 });
  await addWorker(ledger, 'c', 'w1', 1);
  const held = await ledger.reserve('c', user);
  assert.ok(held.ok);
  assert.deepEqual(await ledger.reserve('c', { ...user, balancerId: 'b2', waitIfNone: true }), { ok: false, reason: 'full' });
  assert.deepEqual(await ledger.reserve('c', { ...user, balancerId: 'b3', waitIfNone: true }), { ok: false, reason: 'full' });
  await ledger.release('c', held.leaseId);
  await ledger.stopWaiting('c', 'b2', 'user');
  // b3 still waits.
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'user-present-waiting' });
  // b2 says so again, then stops for good; b3's entry expires on its own.
  await ledger.stillWaiting('c', 'b2', true);
  await ledger.stopWaiting('c', 'b2', 'all');
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'user-present-waiting' });
  await new Promise((resolve) => setTimeout(resolve, 1_600));
  assert.ok((await ledger.reserve('c', background)).ok);
});

test('a busy balancer makes at most one call per batch window; an idle one waits for nothing', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0, batchWindowMs: 50 });
  await addWorker(ledger, 'c', 'w1', 100);
  let startedAt = performance.now();
  assert.ok((await ledger.reserve('c', user)).ok);
  const idleMs = performance.now() - startedAt;
  assert.ok(idleMs < 40, `the first call went out at once (${idleMs.toFixed(1)} ms)`);
  startedAt = performance.now();
  const callsBefore = ledger.settleCounts.calls;
  // Ten reservations, one every 5 ms, all within one window of the previous call.
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < 10; i++) {
    pending.push(ledger.reserve('c', user));
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  await Promise.all(pending);
  const calls = ledger.settleCounts.calls - callsBefore;
  const tookMs = performance.now() - startedAt;
  assert.ok(calls <= Math.ceil(tookMs / 50) + 1, `${calls} calls in ${tookMs.toFixed(0)} ms`);
  assert.ok(calls < 10, `batched: ${calls} calls for 10 reservations`);
});

test('a heartbeat that says its address is unchanged still registers, address and all, a worker the ledger lost', async (t) => {
  const redis = await ownRedis(t);
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 }, redis.url);
  const beat = (addressUnchanged: boolean) =>
    ledger.heartbeat('c', { workerId: 'w1', address: '127.0.0.1:7', capacity: 2, draining: false, heldLeaseIds: [], addressUnchanged });
  await beat(false);
  await redis.flushAll();
  await beat(true);
  assert.deepEqual([...(await ledger.addresses('c'))], [['w1', '127.0.0.1:7']]);
  assert.equal((await ledger.snapshot('c')).totalFree, 2);
});

/** The cluster's keys that exist now (the lease hashes of `workerIds` included). */
async function clusterKeysLeft(ledger: Ledger, cluster: string, workerIds: string[]): Promise<string[]> {
  const keys = clusterKeys(ledger.options.keyPrefix, cluster);
  const candidates = [...keys.all.filter((key) => key !== keys.leasesPrefix), ...workerIds.map((id) => `${keys.leasesPrefix}${id}`)];
  const present = await Promise.all(candidates.map(async (key) => ((await ledger.redis.exists(key)) === 1 ? key : undefined)));
  return present.filter((key): key is string => key !== undefined);
}

test("the last worker to leave, deregistered or swept, takes its cluster's keys with it: a stopped fleet leaves nothing in Redis", async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  await addWorker(ledger, 'c', 'w2', 2);
  const lease = await ledger.reserve('c', user);
  assert.ok(lease.ok);
  await ledger.release('c', lease.leaseId);
  const known = await ledger.addressesIfChanged('c', undefined);
  assert.ok(known.changed);
  assert.equal(await ledger.deregister('c', 'w1'), true);
  assert.ok((await clusterKeysLeft(ledger, 'c', ['w1', 'w2'])).length > 0, 'one worker left: its cluster keeps its keys');
  // w2 falls silent: the sweep removes the last worker.
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.deepEqual(await ledger.sweep('c', 250), { workersRemoved: 1 });
  assert.deepEqual(await clusterKeysLeft(ledger, 'c', ['w1', 'w2']), []);
  // A balancer that knew the list sees a change (to none), and the cluster works again when a worker joins.
  const gone = await ledger.addressesIfChanged('c', known.version);
  assert.ok(gone.changed && gone.addresses.size === 0);
  await addWorker(ledger, 'c', 'w3', 2);
  const back = await ledger.addressesIfChanged('c', gone.version);
  assert.ok(back.changed && back.addresses.size === 1);
  const snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.totalFree], [2, 2]);
  assert.equal(await ledger.deregister('c', 'w3'), true);
  assert.deepEqual(await clusterKeysLeft(ledger, 'c', ['w3']), []);
});

test('the directory version changes when a worker joins, leaves or moves, not at every heartbeat', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  const first = await ledger.addressesIfChanged('c', undefined);
  assert.ok(first.changed);
  assert.deepEqual([...first.addresses], [['w1', '127.0.0.1:1002']]);
  await addWorker(ledger, 'c', 'w1', 3);
  assert.deepEqual(await ledger.addressesIfChanged('c', first.version), { changed: false });
  await addWorker(ledger, 'c', 'w22', 2);
  const joined = await ledger.addressesIfChanged('c', first.version);
  assert.ok(joined.changed && joined.addresses.size === 2);
  await ledger.heartbeat('c', { workerId: 'w22', address: '127.0.0.1:9', capacity: 2, draining: false, heldLeaseIds: [] });
  const moved = await ledger.addressesIfChanged('c', joined.version);
  assert.ok(moved.changed && moved.addresses.get('w22') === '127.0.0.1:9');
  await ledger.deregister('c', 'w22');
  const left = await ledger.addressesIfChanged('c', moved.version);
  assert.ok(left.changed && left.addresses.size === 1);
});

test('a worker marked unreachable takes no slot while the mark lasts, and its slots leave the totals', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0.5 });
  await addWorker(ledger, 'c', 'near', 2);
  await addWorker(ledger, 'c', 'far', 6);
  const sentBeforeTheMark = await ledger.reserve('c', user);
  assert.ok(sentBeforeTheMark.ok && sentBeforeTheMark.workerId === 'far');
  const mark = await ledger.markUnreachable('c', 'far', 60_000, 0.5);
  assert.equal(mark.result, 'marked');
  let snap = await ledger.snapshot('c');
  const far = snap.workers.find((w) => w.workerId === 'far')!;
  assert.ok(far.unreachableUntilMs !== null && mark.result === 'marked' && far.unreachableUntilMs === mark.untilMs);
  assert.equal(snap.workers.find((w) => w.workerId === 'near')!.unreachableUntilMs, null);
  // The totals are those of 'near' alone: the kept share is 1 of its 2 slots.
  assert.deepEqual([snap.totalCapacity, snap.totalFree], [2, 2]);
  const first = await ledger.reserve('c', background);
  assert.ok(first.ok && first.workerId === 'near', 'least-loaded among the reachable workers');
  assert.deepEqual(await ledger.reserve('c', background), { ok: false, reason: 'kept-for-user-present' });
  const second = await ledger.reserve('c', user);
  assert.ok(second.ok && second.workerId === 'near');
  assert.deepEqual(await ledger.reserve('c', user), { ok: false, reason: 'full' });
  assert.deepEqual(await ledger.reserve('c', { ...user, targetWorkerId: 'far' }), { ok: false, reason: 'target-full' });
  // Neither a heartbeat nor a lease that ends while the mark lasts brings it back.
  const hb = await addWorker(ledger, 'c', 'far', 6);
  assert.equal(hb.markedUnreachable, true, 'the worker learns of the mark at its heartbeat');
  assert.equal(await ledger.release('c', sentBeforeTheMark.leaseId), true, 'its lease is given back as usual');
  assert.equal(await ledger.release('c', first.leaseId), true);
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.totalFree], [2, 1]);
  // A health check passed: back at once, with all its slots.
  assert.equal(await ledger.clearUnreachable('c', 'far'), true);
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.totalFree, snap.workers.find((w) => w.workerId === 'far')!.unreachableUntilMs, snap.leases], [8, 7, null, 1]);
  const back = await ledger.reserve('c', user);
  assert.ok(back.ok && back.workerId === 'far' && back.freeSlotsBefore === 6);
  assert.equal((await addWorker(ledger, 'c', 'far', 6, [back.leaseId])).markedUnreachable, false);
});

test('an unreachable mark nobody clears ends at the first heartbeat after it expired; the worker keeps its leases', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 3);
  await addWorker(ledger, 'c', 'w2', 1);
  const running = await ledger.reserve('c', user);
  assert.ok(running.ok && running.workerId === 'w1');
  assert.equal((await ledger.markUnreachable('c', 'w1', 150, 1)).result, 'marked');
  // A shorter mark does not cut a longer one short.
  assert.equal((await ledger.markUnreachable('c', 'w1', 50, 1)).result, 'marked');
  await new Promise((resolve) => setTimeout(resolve, 80));
  assert.equal((await addWorker(ledger, 'c', 'w1', 3, [running.leaseId])).markedUnreachable, true);
  const other = await ledger.reserve('c', user);
  assert.ok(other.ok && other.workerId === 'w2');
  await new Promise((resolve) => setTimeout(resolve, 120));
  let snap = await ledger.snapshot('c');
  assert.equal(snap.workers.find((w) => w.workerId === 'w1')!.unreachableUntilMs, null, 'shown as over once expired');
  assert.equal(snap.totalCapacity, 1, 'still out until its heartbeat');
  const hb = await addWorker(ledger, 'c', 'w1', 3, [running.leaseId]);
  assert.deepEqual([hb.markedUnreachable, hb.inflight], [false, 1]);
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.totalFree, snap.leases], [4, 2, 2]);
  const again = await ledger.reserve('c', user);
  assert.ok(again.ok && again.workerId === 'w1' && again.freeSlotsBefore === 2);
  assert.equal(await ledger.redis.zcard(ledger.keys('c').unreachable), 0);
});

test('a draining worker stays out when its unreachable mark is cleared; a worker that leaves takes its mark with it', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  await addWorker(ledger, 'c', 'w2', 2);
  assert.equal((await ledger.markUnreachable('c', 'w1', 60_000, 1)).result, 'marked');
  assert.equal(await ledger.drain('c', 'w1'), true);
  assert.equal(await ledger.clearUnreachable('c', 'w1'), true);
  let snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.workers[0]!.draining, snap.workers[0]!.unreachableUntilMs], [2, true, null]);
  assert.equal((await ledger.markUnreachable('c', 'w2', 60_000, 1)).result, 'marked');
  assert.equal(await ledger.deregister('c', 'w2'), true);
  assert.equal(await ledger.redis.zcard(ledger.keys('c').unreachable), 0, 'no mark left behind');
  assert.deepEqual(await ledger.markUnreachable('c', 'w2', 60_000, 1), { result: 'not-registered' });
  assert.equal(await ledger.clearUnreachable('c', 'w2'), false);
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.totalFree], [0, 0]);
});

test('a mark keeps its reason for operators; a balancer clears only the mark it made, not one another renewed since', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 2);
  await addWorker(ledger, 'c', 'w2', 2);
  const first = await ledger.markUnreachable('c', 'w1', 60_000, 1, 'failing');
  assert.equal(first.result, 'marked');
  let snap = await ledger.snapshot('c');
  assert.deepEqual(
    snap.workers.map((w) => [w.workerId, w.ejectedReason]),
    [
      ['w1', 'failing'],
      ['w2', null],
    ],
  );
  assert.equal(await ledger.ejectionReason('c', 'w1'), 'failing');
  // Another balancer renews it for longer: the first one's clear keeps it.
  const renewed = await ledger.markUnreachable('c', 'w1', 120_000, 1, 'failing');
  assert.ok(first.result === 'marked' && renewed.result === 'marked' && renewed.untilMs > first.untilMs);
  assert.equal(await ledger.clearEjection('c', 'w1', first.untilMs), 'kept');
  assert.equal((await ledger.snapshot('c')).totalCapacity, 2, 'still out');
  assert.equal(await ledger.clearEjection('c', 'w1', renewed.untilMs), 'cleared');
  snap = await ledger.snapshot('c');
  assert.deepEqual([snap.totalCapacity, snap.workers[0]!.unreachableUntilMs, snap.workers[0]!.ejectedReason], [4, null, null]);
  assert.equal(await ledger.redis.hlen(ledger.keys('c').ejectionReason), 0, 'no reason left behind');
  assert.equal(await ledger.clearEjection('c', 'w9', 1), 'not-registered');
  // A mark without a reason (an older balancer's) reads as unreachable; a worker that leaves takes its reason with it.
  await ledger.markUnreachable('c', 'w2', 60_000, 1);
  assert.equal((await ledger.snapshot('c')).workers[1]!.ejectedReason, 'unreachable');
  await ledger.markUnreachable('c', 'w1', 60_000, 1, 'failing');
  await ledger.deregister('c', 'w1');
  assert.equal(await ledger.redis.hexists(ledger.keys('c').ejectionReason, 'w1'), 0);
});

test('no more workers are marked unreachable at once than the share allows (at least one)', async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  for (let i = 0; i < 5; i++) await addWorker(ledger, 'c', `w${i}`, 1);
  assert.equal((await ledger.markUnreachable('c', 'w0', 60_000, 0.4)).result, 'marked');
  assert.equal((await ledger.markUnreachable('c', 'w1', 60_000, 0.4)).result, 'marked');
  assert.deepEqual(await ledger.markUnreachable('c', 'w2', 60_000, 0.4), { result: 'too-many', marked: 2, workers: 5 });
  // Extending a mark already held is not a new one.
  assert.equal((await ledger.markUnreachable('c', 'w1', 120_000, 0.4)).result, 'marked');
  assert.equal((await ledger.markUnreachable('c', 'w3', 60_000, 0)).result, 'too-many');
  assert.equal((await ledger.snapshot('c')).totalCapacity, 3);
  const single = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(single, 'c', 'only', 1);
  assert.equal((await single.markUnreachable('c', 'only', 60_000, 0.1)).result, 'marked', 'one worker can always be marked');
});

test("a start rate's key lives under the cluster's hash tag, so settle keeps the rate on one shard", async (t) => {
  const ledger = await openLedger(t, { keptForUserPresentShare: 0 });
  await addWorker(ledger, 'c', 'w1', 10);
  await ledger.setIntegrationLimit('c', 'bank-a', { off: true, maxStartsPerSecond: 2 });
  const task = { priority: 'user' as const, balancerId: 'b1', waitIfNone: false, integration: 'bank-a' };
  assert.equal((await ledger.reserve('c', task)).ok, true);
  assert.equal((await ledger.reserve('c', task)).ok, true);
  const refused = await ledger.reserve('c', task);
  assert.ok(!refused.ok && refused.reason === 'integration-at-rate', JSON.stringify(refused));
  const rateKey = `${ledger.keys('c').integrationRatePrefix}bank-a`;
  assert.ok(rateKey.startsWith(`{${ledger.options.keyPrefix}:c}:`));
  assert.ok((await ledger.redis.pttl(rateKey)) > 0);
});
