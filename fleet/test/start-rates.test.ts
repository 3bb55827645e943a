/**
 * Start rates (a limit's maxStartsPerSecond), on a real Redis: settle-12.lua's GCRA holds across
 * ledgers (balancers) sharing one Redis, answers how long to wait, follows a change at the next
 * call, and leaves no key behind once an integration is idle.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import { isHeadroomError } from '@headroom/common';
import { deleteKeysUnder, eventually, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import {
  Ledger,
  LuaScripts,
  clusterKeys,
  connectRedis,
  decodeIntegrationLimit,
  encodeIntegrationLimit,
  type LedgerOptions,
  type Reservation,
} from '../src/index';

async function openLedgers(t: TestContext, count: number, options: LedgerOptions = {}): Promise<Ledger[]> {
  const keyPrefix = uniquePrefix('rates');
  const ledgers: Ledger[] = [];
  for (let i = 0; i < count; i++) {
    const redis = connectRedis(testRedisUrl);
    await new Promise((resolve) => redis.once('ready', resolve));
    ledgers.push(new Ledger(redis, { keptForUserPresentShare: 0, ...options, keyPrefix }));
  }
  t.after(async () => {
    try {
      await deleteKeysUnder(ledgers[0]!.redis, keyPrefix);
    } finally {
      for (const ledger of ledgers) ledger.redis.disconnect();
    }
  });
  await ledgers[0]!.heartbeat('c', { workerId: 'w1', address: '127.0.0.1:1001', capacity: 100, draining: false, heldLeaseIds: [] });
  return ledgers;
}

const task = (integration: string, priority: 'user' | 'background' = 'user') => ({ priority, balancerId: 'b1', waitIfNone: false, integration });

function atRate(reservation: Reservation, rate: number): number {
  assert.ok(!reservation.ok && reservation.reason === 'integration-at-rate', `expected integration-at-rate, got ${JSON.stringify(reservation)}`);
  assert.equal(reservation.maxStartsPerSecond, rate);
  assert.ok(reservation.retryAfterMs >= 1, `retryAfterMs ${reservation.retryAfterMs}`);
  return reservation.retryAfterMs;
}

test('limits with a start rate are encoded compatibly, decoded back, and bad rates are refused naming the field', () => {
  const forms: [unknown, string][] = [
    [{ maxInFlight: 20, maxStartsPerSecond: 1000 }, 'max:20;rate:1000'],
    [{ shareOfCapacity: 0.3, maxStartsPerSecond: 50 }, 'share:0.3;rate:50'],
    [{ off: true, maxStartsPerSecond: 0.5 }, 'off;rate:0.5'],
    [{ maxStartsPerSecond: 1_000_000 }, 'rate:1000000'],
    [{ maxInFlight: 20 }, 'max:20'],
  ];
  for (const [limit, spec] of forms) {
    assert.equal(encodeIntegrationLimit('bank-a', limit).spec, spec);
    assert.deepEqual(decodeIntegrationLimit(spec), limit);
  }
  for (const bad of [-1, 0, NaN, Infinity, '1000', 1e7, 0.0001, null, true]) {
    assert.throws(
      () => encodeIntegrationLimit('bank-a', { maxInFlight: 3, maxStartsPerSecond: bad }),
      (error: unknown) => isHeadroomError(error, 'HR_ERR_INVALID_LIMIT') && error.message.startsWith('limit.maxStartsPerSecond: got '),
      String(bad),
    );
  }
  assert.throws(() => encodeIntegrationLimit('bank-a', { maxInFlight: 3, shareOfCapacity: 0.5, maxStartsPerSecond: 1 }), /^.*limit: got the fields/);
  for (const unknown of ['rate:', 'rate:x', 'max:3;rate:0', 'max:3;share:0.5', 'max:3;rate:1;rate:2', ';rate:5'])
    assert.equal(decodeIntegrationLimit(unknown), null, unknown);
});

test('3 ledgers sharing one Redis start no more than rate x window + burst, and come close to it', { timeout: 60_000 }, async (t) => {
  const ledgers = await openLedgers(t, 3);
  const rate = 100;
  await ledgers[0]!.setIntegrationLimit('c', 'bank-a', { off: true, maxStartsPerSecond: rate });
  let starts = 0;
  let refusals = 0;
  const runForMs = 2_000;
  const startedAt = performance.now();
  // 4 loops per ledger: each reserves, releases what it got at once (the in-flight part is off),
  // and waits as long as the ledger says when refused.
  const loop = async (ledger: Ledger) => {
    while (performance.now() - startedAt < runForMs) {
      const reservation = await ledger.reserve('c', task('bank-a'));
      if (reservation.ok) {
        starts++;
        await ledger.release('c', reservation.leaseId);
      } else {
        refusals++;
        await sleep(atRate(reservation, rate));
      }
    }
  };
  await Promise.all(ledgers.flatMap((ledger) => [loop(ledger), loop(ledger), loop(ledger), loop(ledger)]));
  // Every start fell within this window, measured around every call.
  const windowS = (performance.now() - startedAt) / 1000;
  const allowed = rate * windowS + rate;
  t.diagnostic(`${starts} starts and ${refusals} refusals in ${windowS.toFixed(2)} s; at most ${allowed.toFixed(0)}`);
  assert.ok(starts <= allowed, `${starts} starts > ${allowed}`);
  // The first start's burst, then the rate: the loops waited only as long as the ledger said.
  assert.ok(starts >= 0.85 * (rate * (runForMs / 1000) + rate), `${starts} starts, far below the rate`);
  assert.ok(refusals > 0);
});

test('a rate change takes effect at the next settle, keeping the starts in hand up to the new burst', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 50, maxStartsPerSecond: 1000 });
  for (let i = 0; i < 10; i++) assert.equal((await ledger!.reserve('c', task('bank-a'))).ok, true);
  // Lowered to 2 a second: 990 starts in hand, capped at the new burst of 2.
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 50, maxStartsPerSecond: 2 });
  assert.equal((await ledger!.reserve('c', task('bank-a'))).ok, true);
  assert.equal((await ledger!.reserve('c', task('bank-a'))).ok, true);
  const waitMs = atRate(await ledger!.reserve('c', task('bank-a')), 2);
  assert.ok(waitMs > 400 && waitMs <= 500, `waits ${waitMs} ms for the next of 2 a second`);
  // Other integrations are not held back.
  assert.equal((await ledger!.reserve('c', task('bank-b'))).ok, true);
  // Raised again: the wait is one interval of the new rate at most.
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 50, maxStartsPerSecond: 1000 });
  const raised = await ledger!.reserve('c', task('bank-a'));
  if (!raised.ok) assert.ok(atRate(raised, 1000) <= 1);
  await eventually('a start at the raised rate', 5_000, async () => ((await ledger!.reserve('c', task('bank-a'))).ok ? true : undefined));
  // The rate removed: starts are limited by the in-flight part alone.
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 50 });
  const states = await ledger!.integrationLimits('c');
  assert.deepEqual(
    states.map((s) => [s.integration, s.maxStartsPerSecond]),
    [
      ['bank-a', null],
      ['bank-b', null],
    ],
  );
});

test('the in-flight limit is checked first; a rate alone keeps the default in-flight limit; refusals at the rate spend no start', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxInFlight: 2, maxStartsPerSecond: 3 });
  const first = await ledger!.reserve('c', task('bank-a'));
  assert.equal((await ledger!.reserve('c', task('bank-a'))).ok, true);
  assert.deepEqual(await ledger!.reserve('c', task('bank-a')), { ok: false, reason: 'integration-at-limit', limit: 2 });
  assert.ok(first.ok);
  await ledger!.release('c', first.leaseId);
  // One start left of the burst of 3 (the refusal at the limit spent none).
  assert.equal((await ledger!.reserve('c', task('bank-a'))).ok, true);
  await ledger!.setIntegrationLimit('c', 'bank-a', { maxStartsPerSecond: 1000 });
  const [state] = await ledger!.integrationLimits('c');
  assert.deepEqual([state!.limit, state!.maxInFlight, state!.maxStartsPerSecond], [{ maxStartsPerSecond: 1000 }, 50, 1000]);
});

test('a user-present task at its rate does not hold back background work, and waits registered for its own integration only', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await ledger!.setIntegrationLimit('c', 'slow', { off: true, maxStartsPerSecond: 1 });
  assert.equal((await ledger!.reserve('c', task('slow'))).ok, true);
  atRate(await ledger!.reserve('c', { ...task('slow'), waitIfNone: true }), 1);
  assert.equal((await ledger!.reserve('c', task('fast', 'background'))).ok, true);
  assert.deepEqual((await ledger!.snapshot('c')).waitingUserPresentBalancers, []);
});

test('background starts leave the share kept for user-present tasks in hand: user-present tasks still go first', async (t) => {
  const [ledger] = await openLedgers(t, 1, { keptForUserPresentShare: 0.2 });
  await ledger!.setIntegrationLimit('c', 'bank-a', { off: true, maxStartsPerSecond: 10 });
  // A burst of 10, of which 2 are kept: 8 background starts, then only user-present ones.
  for (let i = 0; i < 8; i++) assert.equal((await ledger!.reserve('c', task('bank-a', 'background'))).ok, true, `background start ${i + 1}`);
  atRate(await ledger!.reserve('c', task('bank-a', 'background')), 10);
  assert.equal((await ledger!.reserve('c', task('bank-a', 'user'))).ok, true);
  assert.equal((await ledger!.reserve('c', task('bank-a', 'user'))).ok, true);
  atRate(await ledger!.reserve('c', task('bank-a', 'user')), 10);
  // A burst of one start keeps none: background work still runs at a rate below one a second.
  await ledger!.setIntegrationLimit('c', 'bank-b', { off: true, maxStartsPerSecond: 0.5 });
  assert.equal((await ledger!.reserve('c', task('bank-b', 'background'))).ok, true);
});

test('the default limit may carry a start rate; it applies to integrations with no limit of their own; the key expires', async (t) => {
  const [ledger] = await openLedgers(t, 1, { defaultIntegrationLimit: { shareOfCapacity: 0.5, minInFlight: 8, maxStartsPerSecond: 2 } });
  await ledger!.setIntegrationLimit('c', 'own', { maxInFlight: 10 });
  for (let i = 0; i < 2; i++) assert.equal((await ledger!.reserve('c', task('any'))).ok, true);
  atRate(await ledger!.reserve('c', task('any')), 2);
  for (let i = 0; i < 5; i++) assert.equal((await ledger!.reserve('c', task('own'))).ok, true, 'an own limit without a rate has none');
  const key = `${clusterKeys(ledger!.options.keyPrefix, 'c').integrationRatePrefix}any`;
  const ttlMs = await ledger!.redis.pttl(key);
  assert.ok(ttlMs > 0 && ttlMs <= 1_000, `the GCRA key lives until it falls due, at most a second here: ${ttlMs} ms`);
  assert.equal(await ledger!.redis.exists(`${clusterKeys(ledger!.options.keyPrefix, 'c').integrationRatePrefix}own`), 0);
  await eventually('the idle integration leaves no key', 5_000, async () => ((await ledger!.redis.exists(key)) === 0 ? true : undefined));
  assert.throws(
    () => new Ledger(ledger!.redis, { defaultIntegrationLimit: { off: true, maxStartsPerSecond: -5 } }),
    /defaultIntegrationLimit.maxStartsPerSecond/,
  );
});

test('the ledger script refuses a malformed rate written around the validation, changing nothing', async (t) => {
  const [ledger] = await openLedgers(t, 1);
  await ledger!.setIntegrationLimit('c', 'a', { maxInFlight: 5, maxStartsPerSecond: 10 });
  const keys = clusterKeys(ledger!.options.keyPrefix, 'c');
  for (const spec of ['rate:0', 'rate:abc', 'rate:nan', 'max:5;rate:2000000', 'max:5;burst:3', 'max:5;rate:']) {
    const reply = await LuaScripts.of().run(ledger!.redis, 'integration-limit', [...keys.all, keys.slotFreedChannel, 'a', spec]);
    assert.deepEqual(reply, ['bad-spec'], spec);
  }
  assert.deepEqual((await ledger!.integrationLimits('c'))[0]!.limit, { maxInFlight: 5, maxStartsPerSecond: 10 });
});
