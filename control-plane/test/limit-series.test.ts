/**
 * The limits' time series against a real fleet on real Redis: a balancer holds an integration
 * at its limit (tasks in flight, waiting, refused), and the series shows each figure in the
 * 10-second slot it happened in, refusals per slot rather than a running count.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { Counter, Gauge, Registry } from 'prom-client';
import { silentLogger } from '@headroom/common';
import { BalancerErrorRecorder, LatencyRecorder, latencyKeys, slotStartOf } from '@headroom/fleet';
import { eventually, heldHandlers, startFleet, startStack, submit, task, viewerToken, type Stack } from '@headroom/testkit';
import { LimitSeries, defaultLimitSeriesOptions, type LimitSeriesPoint as Point } from '../src/limits/limit-series';
import type { LimitSample } from '../src/limits/limit-service';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const slotMs = 10_000;

const seriesOf = async (stack: Stack, minutes = 2): Promise<Point[]> => {
  const answer = await stack.api('GET', `/limits/baseline/bank-a/series?minutes=${minutes}`);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return answer.body.points as Point[];
};

/** The figures the sampler wrote to one slot of bank-a on baseline, straight from Redis. */
const slotFigures = async (stack: Stack, slotStartMs: number) => {
  const fields = await stack.fleet.redis.hgetall(latencyKeys(stack.fleet.ledgerOptions.keyPrefix!).limitSeriesSlot(slotStartMs));
  return { inflight: Number(fields['baseline\tbank-a\tinflight'] ?? -1), waiting: Number(fields['baseline\tbank-a\twaiting'] ?? -1) };
};

test(
  'a balancer holding bank-a at its limit: the series shows in flight, waiting and refused in their slots, and the run time',
  { timeout: 120_000 },
  async (t) => {
    const stack = await startStack(t, unleash, { limitSeriesSampleMs: 200, latencySettleMs: 500 });
    const held = heldHandlers();
    await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 10, latencyReportIntervalMs: 200 }, held.handlers);
    // Two tasks of one integration may wait here at its limit (half of 4); more are refused.
    await stack.fleet.addBalancer({ maxQueuedTasks: 4, maxQueuedShareAtLimit: 0.5, balancerHeartbeatIntervalMs: 200 });
    assert.equal((await stack.api('PUT', '/limits/baseline/bank-a', { limit: { maxInFlight: 2 } })).status, 200);

    // What follows takes a few hundred ms: starting early in a slot keeps it in one slot, though the checks do not need it.
    await eventually('the start of a 10 s slot', 15_000, async () => (Date.now() % slotMs < 2000 ? true : undefined));
    const submittedSlot = slotStartOf(Date.now(), slotMs);
    const answers = Array.from({ length: 7 }, () => submit(stack.fleet.clients[0]!, task({ integration: 'bank-a' })));
    const busySlot = await eventually('2 in flight and 2 waiting sampled', 10_000, async () => {
      const slot = slotStartOf(Date.now(), slotMs);
      const figures = await slotFigures(stack, slot);
      return figures.inflight === 2 && figures.waiting === 2 ? slot : undefined;
    });
    const refusedCodes = (await Promise.all(answers.slice(4))).map((answer) => (answer.ok ? 'ok' : answer.code));
    assert.deepEqual(refusedCodes, ['HR_ERR_INTEGRATION_AT_LIMIT', 'HR_ERR_INTEGRATION_AT_LIMIT', 'HR_ERR_INTEGRATION_AT_LIMIT']);
    const refusedBySlot = slotStartOf(Date.now(), slotMs);

    // Every task ends (the waiting ones run once the first ones end): nothing in flight, nothing waiting.
    for (const id of [...held.waiting.keys()]) await held.finish(id);
    await eventually('the waiting tasks to run', 10_000, async () => (held.waiting.size === 4 ? true : undefined));
    for (const id of [...held.waiting.keys()]) await held.finish(id);
    assert.ok((await Promise.all(answers.slice(0, 4))).every((answer) => answer.ok));
    await eventually('nothing in flight', 5000, async () =>
      (await stack.fleet.ledger.integrationLimits('baseline')).find((s) => s.integration === 'bank-a')?.inflight === 0 ? true : undefined,
    );
    const quietSlot = slotStartOf(Date.now(), slotMs) + slotMs;

    const points = await eventually('the quiet slot settled and sampled', 30_000, async () => {
      const series = await seriesOf(stack);
      const quiet = series.find((p) => p.startUnixMs === quietSlot);
      return quiet && quiet.inFlight !== null && series.filter((p) => p.startUnixMs < quietSlot).reduce((sum, p) => sum + p.tasks, 0) === 4
        ? series
        : undefined;
    });
    const busy = points.find((p) => p.startUnixMs === busySlot)!;
    assert.deepEqual(
      { limit: busy.limitInFlight, inFlight: busy.inFlight, waiting: busy.waiting },
      { limit: 2, inFlight: 2, waiting: 2 },
      JSON.stringify(busy),
    );
    // The 3 refusals are in the slots they happened in (one, unless the machine is slow), and nowhere else.
    const refusedIn = (from: number, to: number) => points.filter((p) => p.startUnixMs >= from && p.startUnixMs <= to).reduce((sum, p) => sum + p.refused, 0);
    assert.equal(refusedIn(submittedSlot, refusedBySlot), 3, JSON.stringify(points));
    assert.equal(refusedIn(0, Infinity), 3, JSON.stringify(points));
    const quiet = points.find((p) => p.startUnixMs === quietSlot)!;
    assert.deepEqual(
      { limit: quiet.limitInFlight, inFlight: quiet.inFlight, waiting: quiet.waiting, refused: quiet.refused, tasks: quiet.tasks },
      { limit: 2, inFlight: 0, waiting: 0, refused: 0, tasks: 0 },
      'refusals count per slot, not as a running total',
    );
    // The 4 tasks ended between the busy slot and the quiet one; where they ended, the run time shows.
    const ended = points.filter((p) => p.tasks > 0);
    assert.ok(
      ended.length > 0 && ended.every((p) => p.startUnixMs >= submittedSlot && p.startUnixMs < quietSlot && p.p50Ms !== null && p.p99Ms! >= p.p50Ms!),
      JSON.stringify(points),
    );
    assert.ok(
      points.every((p, i) => i === 0 || p.startUnixMs - points[i - 1]!.startUnixMs === slotMs),
      'one point per 10 s slot, oldest first',
    );
    // bank-b, configured but idle, has the default limit: half of 10 slots, at least 8.
    const bankB = (await stack.api('GET', '/limits/baseline/bank-b/series?minutes=2')).body.points as Point[];
    assert.deepEqual(
      bankB.filter((p) => p.startUnixMs === quietSlot).map((p) => [p.limitInFlight, p.inFlight, p.waiting]),
      [[8, 0, 0]],
    );
    assert.match(String((await stack.api('GET', '/metrics')).body), /^headroom_control_limit_series_samples_total\{outcome="ok"\} [1-9]/m);
  },
);

test('the series route: bad input is refused with 400 naming the field, an unknown cluster is 404, a viewer reads it', async (t) => {
  const stack = await startStack(t, unleash, { limitSeriesSampleMs: 200 });
  const cases: { path: string; field: string }[] = [
    { path: 'baseline/bank-a/series?minutes=0', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?minutes=61', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?minutes=1.5', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?minutes=-1', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?minutes=abc', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?minutes=', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?minutes=5&minutes=6', field: 'query.minutes' },
    { path: 'baseline/bank-a/series?window=5m', field: 'query.window' },
    { path: 'baseline/Bank_A/series', field: 'path.integration' },
    { path: 'baseline/constructor/series', field: 'path.integration' },
    { path: 'base%20line/bank-a/series', field: 'path.cluster' },
  ];
  for (const bad of cases) {
    const answer = await stack.api('GET', `/limits/${bad.path}`);
    const where = `GET ${bad.path} → ${answer.status} ${JSON.stringify(answer.body)}`;
    assert.equal(answer.status, 400, where);
    assert.equal(answer.body.error.code, 'HR_ERR_INVALID_REQUEST', where);
    assert.ok(
      (answer.body.error.fields as { field: string }[]).some((f) => f.field === bad.field),
      `${where}: expected the field ${bad.field}`,
    );
  }
  const unknown = await stack.api('GET', '/limits/nope/bank-a/series');
  assert.equal(unknown.status, 404, JSON.stringify(unknown.body));
  const viewer = await stack.api('GET', '/limits/baseline/bank-a/series?minutes=60', undefined, viewerToken);
  assert.equal(viewer.status, 200, JSON.stringify(viewer.body));
  assert.deepEqual(Object.keys(viewer.body).sort(), ['cluster', 'integration', 'points', 'slotSeconds']);
  assert.ok(viewer.body.points.length <= 361, 'at most the slots kept');
  assert.equal((await stack.api('GET', '/limits/baseline/bank-a/series', undefined, null)).status, 401);
});

test('integrations past the cap per cluster are left out of the series, busiest first, and counted', async (t) => {
  const stack = await startStack(t, unleash, { limitSeriesSampleMs: 200 });
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 10 });
  // 205 limits straight in the ledger (the API refuses past 200), and the 2 configured integrations.
  for (let i = 0; i < 205; i++) await stack.fleet.ledger.setIntegrationLimit('baseline', `extra-${String(i).padStart(3, '0')}`, { maxInFlight: 1 });
  await eventually('7 left out counted', 10_000, async () =>
    /^headroom_control_limit_series_left_out_integrations\{cluster="baseline"\} 7$/m.test(String((await stack.api('GET', '/metrics')).body)) ? true : undefined,
  );
  // Sorted by name past the busy ones: bank-a and bank-b are sampled, the last extras are not.
  const slot = slotStartOf(Date.now(), slotMs);
  await eventually('the sampled fields', 10_000, async () => {
    const fields = Object.keys(await stack.fleet.redis.hgetall(latencyKeys(stack.fleet.ledgerOptions.keyPrefix!).limitSeriesSlot(slot))).filter((f) =>
      f.startsWith('baseline\t'),
    );
    if (fields.length === 0) return undefined;
    const integrations = new Set(fields.map((f) => f.split('\t')[1]));
    assert.equal(integrations.size, 200);
    assert.ok(integrations.has('bank-a') && integrations.has('extra-000') && !integrations.has('extra-204'), [...integrations].slice(-3).join(','));
    return true;
  });
});

test('two control planes sampling one slot write what one would: the peak in flight and waiting, the last limit', async (t) => {
  const fleet = await startFleet(t);
  const keyPrefix = fleet.ledgerOptions.keyPrefix!;
  const registry = new Registry();
  const metrics = {
    leftOut: new Gauge({ name: 'left_out', help: 'x', labelNames: ['cluster'], registers: [registry] }),
    samples: new Counter({ name: 'samples', help: 'x', labelNames: ['outcome'], registers: [registry] }),
  };
  const planeSampling = (sample: LimitSample) =>
    new LimitSeries({
      redis: fleet.redis,
      keyPrefix,
      clusters: { baseline: 'baseline', candidate: 'candidate' },
      samples: async () => ({ samples: [sample], leftOut: { baseline: 0 } }),
      metrics,
      logger: silentLogger,
      options: { ...defaultLimitSeriesOptions, settleMs: 1000 },
    });
  const slot = slotStartOf(Date.now(), slotMs) - 3 * slotMs;
  const sample = { cluster: 'baseline', integration: 'bank-a' };
  const first = planeSampling({ ...sample, maxInFlight: 6, inflight: 5, waiting: 1 });
  const second = planeSampling({ ...sample, maxInFlight: 4, inflight: 2, waiting: 3 });
  // Tasks refused and run in the slot, as balancers and workers count them.
  const refusals = new BalancerErrorRecorder(fleet.redis, { keyPrefix });
  refusals.record('baseline', 'bank-a', 'HR_ERR_INTEGRATION_AT_LIMIT', slot + 1000);
  refusals.record('baseline', 'bank-a', 'HR_ERR_DEADLINE_EXCEEDED', slot + 1000);
  await refusals.flush();
  const latency = new LatencyRecorder(fleet.redis, { keyPrefix, cluster: 'baseline' });
  for (let i = 0; i < 9; i++) latency.record('bank-a', 100, slot + 2000);
  latency.record('bank-a', 2000, slot + 2000);
  await latency.flush();

  await first.sample(slot + 1000);
  await second.sample(slot + 6000);
  await first.sample(slot + 8000);
  await second.sample(slot + 9000);
  const [point] = (await first.read('baseline', 'bank-a', slotMs, slot + slotMs + 1000)).points;
  assert.equal(point?.startUnixMs, slot);
  const { p50Ms, p99Ms, ...counts } = point!;
  assert.deepEqual(counts, { startUnixMs: slot, limitInFlight: 4, inFlight: 5, waiting: 3, refused: 1, tasks: 10 });
  assert.ok(p50Ms! > 90 && p50Ms! < 110 && p99Ms! > 1800 && p99Ms! < 2200, `${p50Ms} ${p99Ms}`);
  // The slot expires with the latency summaries; a slot nobody sampled has no in flight, not 0.
  const ttlMs = await fleet.redis.pttl(latencyKeys(keyPrefix).limitSeriesSlot(slot));
  assert.ok(ttlMs > 0 && ttlMs <= defaultLimitSeriesOptions.retentionMs + slotMs, String(ttlMs));
  const before = (await first.read('baseline', 'bank-a', 2 * slotMs, slot + 1000)).points.find((p) => p.startUnixMs === slot - slotMs);
  assert.deepEqual([before?.startUnixMs, before?.inFlight, before?.waiting, before?.refused], [slot - slotMs, null, null, 0]);
});
