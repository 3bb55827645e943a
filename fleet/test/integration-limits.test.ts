import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { deleteKeysUnder, eventually, startPrivateRedis, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, connectRedis, encodeIntegrationLimit, integrationField, readIntegrationField, type LedgerOptions, type Reservation } from '../src/index';
import { isHeadroomError } from '@headroom/common';

async function openLedgers(t: TestContext, count: number, options: LedgerOptions = {}, url = testRedisUrl): Promise<Ledger[]> {
  const keyPrefix = options.keyPrefix ?? uniquePrefix('limits');
  const ledgers: Ledger[] = [];
  for (let i = 0; i < count; i++) {
    const redis = connectRedis(url);
    await new Promise((resolve) => redis.once('ready', resolve));
    ledgers.push(new Ledger(redis, { keptForUserPresentShare: 0, ...options, keyPrefix }));
  }
  t.after(async () => {
    try {
      await deleteKeysUnder(ledgers[0]!.redis, keyPrefix);
    } catch {
      // A private Redis may be gone already.
    } finally {
      for (const ledger of ledgers) ledger.redis.disconnect();
    }
  });
  return ledgers;
}

async function addWorker(ledger: Ledger, workerId: string, capacity: number, held: readonly string[] = [], dispatchGraceMs = 60_000) {
  return ledger.heartbeat('c', { workerId, address: `127.0.0.1:${1000 + workerId.length}`, capacity, draining: false, heldLeaseIds: held, dispatchGraceMs });
}

const task = (integration: string, priority: 'user' | 'background' = 'user') => ({ priority, balancerId: 'b1', waitIfNone: false, integration });

async function inflightOf(ledger: Ledger, integration: string): Promise<number> {
  return (await ledger.integrationLimits('c')).find((state) => state.integration === integration)?.inflight ?? 0;
}

function leaseOf(reservation: Reservation): string {
  assert.ok(reservation.ok, `expected a slot, got ${JSON.stringify(reservation)}`);
  return reservation.leaseId;
}

test('no integration exceeds its limit across 3 ledgers under concurrent reservations and releases; the counts stay exact', async (t) => {
  const ledgers = await openLedgers(t, 3);
  for (const w of ['w1', 'w2', 'w3']) await addWorker(ledgers[0]!, w, 10);
  await ledgers[0]!.setIntegrationLimit('c', 'slow', { maxInFlight: 7 });
  // 'fast' has the default: half of 30 slots.
  const limits: Record<string, number> = { slow: 7, fast: 15 };
  const held: Record<string, string[]> = { slow: [], fast: [] };
  for (let round = 0; round < 15; round++) {
    const releases = Object.values(held).flatMap((leases) => leases.splice(0, round % 3));
    const asked = await Promise.all([
      ...releases.map((lease, i) => ledgers[i % 3]!.release('c', lease).then(() => null)),
      ...Array.from({ length: 18 }, (_, i) => {
        const integration = i % 2 === 0 ? 'slow' : 'fast';
        return ledgers[i % 3]!.reserve('c', task(integration)).then((reservation) => ({ integration, reservation }));
      }),
    ]);
    for (const answer of asked) {
      if (!answer) continue;
      if (answer.reservation.ok) held[answer.integration]!.push(answer.reservation.leaseId);
      else assert.deepEqual(answer.reservation, { ok: false, reason: 'integration-at-limit', limit: limits[answer.integration] });
    }
    for (const integration of ['slow', 'fast']) {
      assert.ok(held[integration]!.length <= limits[integration]!, `${integration}: ${held[integration]!.length} in flight, limit ${limits[integration]}`);
      assert.equal(await inflightOf(ledgers[0]!, integration), held[integration]!.length, `${integration}'s count in round ${round}`);
    }
  }
  assert.equal(held.slow!.length, 7, 'the slow integration reached its limit');
  assert.equal(held.fast!.length, 15, 'the other one reached the default');
});

test('a limit change takes effect at the next settle', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 20);
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 2 });
  leaseOf(await ledger!.reserve('c', task('bank-a')));
  const second = leaseOf(await ledger!.reserve('c', task('bank-a')));
  assert.deepEqual(await ledger!.reserve('c', task('bank-a')), { ok: false, reason: 'integration-at-limit', limit: 2 });
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 3 });
  leaseOf(await ledger!.reserve('c', task('bank-a')));
  await ledger!.setIntegrationLimit('c', 'bank-a', { shareOfCapacity: 0.1 });
  assert.deepEqual(await ledger!.reserve('c', task('bank-a')), { ok: false, reason: 'integration-at-limit', limit: 2 });
  await ledger!.release('c', second);
  assert.deepEqual(await ledger!.reserve('c', task('bank-a')), { ok: false, reason: 'integration-at-limit', limit: 2 }, 'two still in flight');
  await ledger!.setIntegrationLimit('c', 'bank-a', { off: true });
  for (let i = 0; i < 10; i++) leaseOf(await ledger!.reserve('c', task('bank-a')));
  await ledger!.setIntegrationLimit('c', 'bank-a', null);
  // Back to the default: max(ceil(0.5 x 20), 8) = 10, and 12 are in flight.
  assert.deepEqual(await ledger!.reserve('c', task('bank-a')), { ok: false, reason: 'integration-at-limit', limit: 10 });
  assert.deepEqual(
    (await ledger!.integrationLimits('c')).map((s) => [s.integration, s.limit, s.maxInFlight, s.inflight]),
    [['bank-a', null, 10, 12]],
  );
});

test('the default limit keeps a floor for small clusters, can be turned off per process, and tasks of no integration have no limit', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 10);
  for (let i = 0; i < 8; i++) leaseOf(await ledger!.reserve('c', task('a')));
  assert.deepEqual(await ledger!.reserve('c', task('a')), { ok: false, reason: 'integration-at-limit', limit: 8 });
  leaseOf(await ledger!.reserve('c', { priority: 'user', balancerId: 'b1', waitIfNone: false }));
  const [unlimited] = await openLedgers(t, 1, { defaultIntegrationLimit: { off: true } });
  await addWorker(unlimited!, 'w1', 10);
  for (let i = 0; i < 10; i++) leaseOf(await unlimited!.reserve('c', task('a')));
  assert.throws(
    () => new Ledger(ledger!.redis, { defaultIntegrationLimit: { shareOfCapacity: 2, minInFlight: 1 } }),
    /defaultIntegrationLimit.shareOfCapacity/,
  );
});

test("a lost release is repaired per integration at the worker's heartbeat", async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 20);
  await ledger!.setIntegrationLimit('c', 'a', { maxInFlight: 3 });
  const leases = [
    leaseOf(await ledger!.reserve('c', task('a'))),
    leaseOf(await ledger!.reserve('c', task('a'))),
    leaseOf(await ledger!.reserve('c', task('a'))),
  ];
  const other = leaseOf(await ledger!.reserve('c', task('b')));
  assert.equal((await ledger!.reserve('c', task('a'))).ok, false);
  // Two of a's tasks were answered and their releases lost: the worker holds one of a's and b's.
  const reply = await addWorker(ledger!, 'w1', 20, [leases[0]!, other], 0);
  assert.equal(reply.leasesDropped, 2);
  assert.equal(await inflightOf(ledger!, 'a'), 1);
  assert.equal(await inflightOf(ledger!, 'b'), 1);
  leaseOf(await ledger!.reserve('c', task('a')));
  // The late releases free nothing twice.
  assert.equal(await ledger!.release('c', leases[1]!), false);
  assert.equal(await inflightOf(ledger!, 'a'), 2);
});

test("a balancer killed while it held an integration at its limit: the share comes back at the worker's heartbeat", async (t) => {
  const [killed, survivor] = await openLedgers(t, 2);
  await addWorker(survivor!, 'w1', 10);
  await addWorker(survivor!, 'w2', 10);
  await survivor!.setIntegrationLimit('c', 'a', { maxInFlight: 4 });
  // Reserved and never dispatched nor released: the balancer died.
  for (let i = 0; i < 4; i++) leaseOf(await killed!.reserve('c', task('a')));
  killed!.redis.disconnect();
  assert.deepEqual(await survivor!.reserve('c', task('a')), { ok: false, reason: 'integration-at-limit', limit: 4 });
  // The workers hold none of those leases; past the dispatch grace, their heartbeats drop them.
  await addWorker(survivor!, 'w1', 10, [], 0);
  await addWorker(survivor!, 'w2', 10, [], 0);
  assert.equal(await inflightOf(survivor!, 'a'), 0);
  for (let i = 0; i < 4; i++) leaseOf(await survivor!.reserve('c', task('a')));
});

test("a worker that dies or leaves takes its leases out of their integrations' counts", async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 4);
  await addWorker(ledger!, 'w2', 4);
  for (let i = 0; i < 6; i++) leaseOf(await ledger!.reserve('c', task(i % 2 ? 'a' : 'b')));
  assert.equal(await inflightOf(ledger!, 'a'), 3);
  await ledger!.deregister('c', 'w1');
  const left = await ledger!.snapshot('c');
  assert.equal((await inflightOf(ledger!, 'a')) + (await inflightOf(ledger!, 'b')), left.leases, 'the counts are the records of the worker left');
  await ledger!.sweep('c', -1_000);
  assert.deepEqual(await ledger!.integrationLimits('c'), []);
});

test('after FLUSHALL, heartbeats give each integration back the tasks still running', async (t) => {
  const redis = await startPrivateRedis();
  t.after(() => redis.stop(true));
  const [ledger] = await openLedgers(t, 1, {}, redis.url);
  await addWorker(ledger!, 'w1', 10);
  const leases = [
    leaseOf(await ledger!.reserve('c', task('a'))),
    leaseOf(await ledger!.reserve('c', task('a'))),
    leaseOf(await ledger!.reserve('c', task('b'))),
  ];
  await ledger!.redis.flushall();
  await addWorker(ledger!, 'w1', 10, leases);
  assert.equal(await inflightOf(ledger!, 'a'), 2);
  assert.equal(await inflightOf(ledger!, 'b'), 1);
  assert.equal(await ledger!.release('c', leases[0]!), true);
  assert.equal(await inflightOf(ledger!, 'a'), 1);
});

test("a user-present task at its integration's limit holds back neither other integrations nor background work", async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 20);
  await ledger!.setIntegrationLimit('c', 'slow', { maxInFlight: 1 });
  leaseOf(await ledger!.reserve('c', task('slow')));
  assert.deepEqual(await ledger!.reserve('c', { ...task('slow'), waitIfNone: true }), { ok: false, reason: 'integration-at-limit', limit: 1 });
  leaseOf(await ledger!.reserve('c', task('fast', 'background')));
  assert.deepEqual((await ledger!.snapshot('c')).waitingUserPresentBalancers, []);
  assert.deepEqual((await ledger!.snapshot('c')).waitingBalancers, ['b1'], 'it waits for a release');
});

test("while a user-present task waits at its integration's limit, that integration's next slot is not a background task's of another balancer", async (t) => {
  const [userFront, backgroundFront] = await openLedgers(t, 2, { waiterTtlMs: 60_000 });
  await addWorker(userFront!, 'w1', 20);
  await userFront!.setIntegrationLimit('c', 'slow', { maxInFlight: 1 });
  const running = leaseOf(await userFront!.reserve('c', task('slow', 'background')));
  // A user-present task of 'slow' waits on one balancer; another balancer's background task of 'slow' is there too.
  assert.deepEqual(await userFront!.reserve('c', { ...task('slow'), waitIfNone: true }), { ok: false, reason: 'integration-at-limit', limit: 1 });
  assert.equal(await backgroundFront!.release('c', running), true);
  assert.deepEqual(
    await backgroundFront!.reserve('c', { ...task('slow', 'background'), balancerId: 'b2' }),
    { ok: false, reason: 'integration-at-limit', limit: 1 },
    'the freed slot of slow is kept for the waiting user-present task',
  );
  leaseOf(await backgroundFront!.reserve('c', { ...task('fast', 'background'), balancerId: 'b2' }));
  leaseOf(await userFront!.reserve('c', { ...task('slow'), waitIfNone: true }));
  // Without a waiter, background tasks of slow take its slots again: a waiter that asked not to wait marks nothing.
  const unmarked = await openLedgers(t, 1, { waiterTtlMs: 60_000 });
  await addWorker(unmarked[0]!, 'w1', 20);
  await unmarked[0]!.setIntegrationLimit('c', 'slow', { maxInFlight: 1 });
  const held = leaseOf(await unmarked[0]!.reserve('c', task('slow', 'background')));
  assert.deepEqual(await unmarked[0]!.reserve('c', task('slow')), { ok: false, reason: 'integration-at-limit', limit: 1 });
  await unmarked[0]!.release('c', held);
  leaseOf(await unmarked[0]!.reserve('c', task('slow', 'background')));
});

test('a release under the limit a user-present task waits at is announced, though the freed slot was taken again in the same call', async (t) => {
  const [ledger] = await openLedgers(t, 1, { waiterTtlMs: 60_000 });
  await addWorker(ledger!, 'w1', 3);
  await ledger!.setIntegrationLimit('c', 'slow', { maxInFlight: 2 });
  const running = [leaseOf(await ledger!.reserve('c', task('slow', 'background'))), leaseOf(await ledger!.reserve('c', task('slow', 'background')))];
  leaseOf(await ledger!.reserve('c', task('fast', 'background')));
  assert.deepEqual(await ledger!.reserve('c', { ...task('slow'), waitIfNone: true }), { ok: false, reason: 'integration-at-limit', limit: 2 });
  const subscriber = connectRedis(testRedisUrl, { enableOfflineQueue: true });
  t.after(() => subscriber.disconnect());
  const messages: string[] = [];
  subscriber.on('message', (_channel: string, worker: string) => messages.push(worker));
  await subscriber.subscribe(ledger!.keys('c').slotFreedChannel);
  // Another balancer gives back a task of slow and takes the cluster's freed slot for fast, in one call.
  const callsBefore = ledger!.settleCounts.calls;
  const [released, reserved] = await Promise.all([
    ledger!.release('c', running[0]!),
    ledger!.reserve('c', { ...task('fast', 'background'), balancerId: 'b2' }),
  ]);
  assert.equal(ledger!.settleCounts.calls - callsBefore, 1);
  assert.deepEqual([released, reserved.ok], [true, true]);
  await eventually('the waiting balancer to be told', 5000, () => (messages.length > 0 ? true : undefined));
});

test("a user-present task's wait at its integration's limit ends with the waiter's time to live", async (t) => {
  const [ledger] = await openLedgers(t, 1, { waiterTtlMs: 200 });
  await addWorker(ledger!, 'w1', 20);
  await ledger!.setIntegrationLimit('c', 'slow', { maxInFlight: 1 });
  const running = leaseOf(await ledger!.reserve('c', task('slow', 'background')));
  await ledger!.reserve('c', { ...task('slow'), waitIfNone: true });
  await ledger!.release('c', running);
  assert.equal((await ledger!.reserve('c', task('slow', 'background'))).ok, false, 'held back while the user-present task may still come');
  const keys = ledger!.keys('c');
  // Past its time to live the mark no longer holds back anything, and the next settle deletes it.
  await eventually('a background task of slow to start again', 10_000, async () =>
    (await ledger!.reserve('c', task('slow', 'background'))).ok ? true : undefined,
  );
  const field = await ledger!.redis.hget(keys.totals, integrationField('slow'));
  assert.equal(field && readIntegrationField(field).userWaitUntilMs, 0, `the wait is gone: ${field}`);
});

test('bad limits are refused with an error naming the field, and change nothing', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 10);
  await ledger!.setIntegrationLimit('c', 'a', { maxInFlight: 5 });
  const bad: [unknown, unknown, string][] = [
    ['a', { maxInFlight: -1 }, 'limit.maxInFlight'],
    ['a', { maxInFlight: 2.5 }, 'limit.maxInFlight'],
    ['a', { maxInFlight: 11 }, 'limit.maxInFlight'],
    ['a', { shareOfCapacity: 1.5 }, 'limit.shareOfCapacity'],
    ['a', { shareOfCapacity: 0 }, 'limit.shareOfCapacity'],
    ['a', { off: false }, 'limit.off'],
    ['a', { maxInFlight: 3, burst: 4 }, 'limit'],
    ['a', JSON.parse('{"__proto__": {"maxInFlight": 3}}'), 'limit'],
    ['a', {}, 'limit'],
    ['a', 'ten', 'limit'],
    ['__proto__', { maxInFlight: 3 }, 'integration'],
    ['Bank A', { maxInFlight: 3 }, 'integration'],
  ];
  for (const [integration, limit, field] of bad) {
    await assert.rejects(ledger!.setIntegrationLimit('c', integration as string, limit as never), (error: unknown) => {
      assert.ok(isHeadroomError(error, 'HR_ERR_INVALID_LIMIT'), String(error));
      assert.ok(error.message.startsWith(`${field}:`), `${JSON.stringify(limit)}: ${error.message}`);
      return true;
    });
  }
  assert.deepEqual(
    (await ledger!.integrationLimits('c')).map((s) => [s.integration, s.limit]),
    [['a', { maxInFlight: 5 }]],
  );
  assert.deepEqual(encodeIntegrationLimit('bank-a', { shareOfCapacity: 0.25 }), { integration: 'bank-a', spec: 'share:0.25' });
  // A reservation's integration is a name as tasks carry it: one that could meet the ledger's
  // prefixed fields (`limit:a` is where a's limit lives) is refused before it reaches Redis.
  for (const integration of ['limit:a', 'user-waits:a', 'A']) {
    await assert.rejects(ledger!.reserve('c', task(integration)), (error: unknown) => {
      assert.ok(isHeadroomError(error, 'HR_ERR_INVALID_LIMIT'), String(error));
      assert.ok(error.message.startsWith('integration:'), error.message);
      return true;
    });
  }
  assert.deepEqual(
    (await ledger!.integrationLimits('c')).map((s) => [s.integration, s.limit, s.inflight]),
    [['a', { maxInFlight: 5 }, 0]],
    'nothing was reserved',
  );
});

test("in one settle call, releases free their integration's share for the reservations after them", async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await addWorker(ledger!, 'w1', 20);
  await ledger!.setIntegrationLimit('c', 'a', { maxInFlight: 2 });
  const first = leaseOf(await ledger!.reserve('c', task('a')));
  leaseOf(await ledger!.reserve('c', task('a')));
  const callsBefore = ledger!.settleCounts.calls;
  // Asked in one turn: one call, the release first.
  const [released, ...reservations] = await Promise.all([ledger!.release('c', first), ledger!.reserve('c', task('a')), ledger!.reserve('c', task('a'))]);
  assert.equal(ledger!.settleCounts.calls - callsBefore, 1);
  assert.equal(released, true);
  assert.deepEqual(
    reservations.map((r) => (r as Reservation).ok),
    [true, false],
  );
  assert.equal(await inflightOf(ledger!, 'a'), 2);
});

test("an integration's limit keeps the user-present share for its user-present tasks, never the whole limit", async (t) => {
  const [ledger] = await openLedgers(t, 1, { keptForUserPresentShare: 0.25 });
  await addWorker(ledger!, 'w1', 20);
  await ledger!.setIntegrationLimit('c', 'bank', { maxInFlight: 4 });
  for (let i = 0; i < 3; i++) leaseOf(await ledger!.reserve('c', task('bank', 'background')));
  assert.deepEqual(await ledger!.reserve('c', task('bank', 'background')), { ok: false, reason: 'integration-at-limit', limit: 4 }, 'ceil(0.25 x 4) = 1 kept');
  leaseOf(await ledger!.reserve('c', task('other', 'background')));
  leaseOf(await ledger!.reserve('c', task('bank')));
  assert.deepEqual(await ledger!.reserve('c', task('bank')), { ok: false, reason: 'integration-at-limit', limit: 4 });
  // A limit of one keeps nothing: its background tasks still run.
  await ledger!.setIntegrationLimit('c', 'single', { maxInFlight: 1 });
  leaseOf(await ledger!.reserve('c', task('single', 'background')));
});

test("where the cluster's kept share is what holds background work back, the refusal says so, not the integration's limit", async (t) => {
  const [ledger] = await openLedgers(t, 1, { keptForUserPresentShare: 0.25 });
  await addWorker(ledger!, 'w1', 4);
  await ledger!.setIntegrationLimit('c', 'bank', { maxInFlight: 4 });
  for (let i = 0; i < 3; i++) leaseOf(await ledger!.reserve('c', task('bank', 'background')));
  // Both keep one of four: the cluster's share is checked first.
  assert.deepEqual(await ledger!.reserve('c', task('bank', 'background')), { ok: false, reason: 'kept-for-user-present' });
});
