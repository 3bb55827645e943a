import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually, json, mapLimit, startStack, submit, task } from '@headroom/testkit';
import { LatencyRecorder } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const within = (actual: number, expected: number, share = 0.05) =>
  assert.ok(Math.abs(actual - expected) <= expected * share, `${actual} is not within ${share * 100}% of ${expected}`);

test('GET /latency: percentiles per integration per cluster and the ratio, from known latencies', async (t) => {
  const stack = await startStack(t, unleash);
  const keyPrefix = stack.fleet.ledgerOptions.keyPrefix!;
  const baseline = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster: 'baseline' });
  const candidate = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster: 'candidate' });
  // bank-a: 1..100 ms on the baseline, 1.5x that on the candidate. bank-b: candidate only.
  for (let ms = 1; ms <= 100; ms++) {
    baseline.record('bank-a', ms);
    candidate.record('bank-a', 1.5 * ms);
    candidate.record('bank-b', 20);
  }
  await Promise.all([baseline.flush(), candidate.flush()]);

  const response = await stack.api('GET', '/latency?window=1m');
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const view = response.body;
  assert.equal(view.windowSeconds, 60);
  const bankA = view.integrations.find((i: { integration: string }) => i.integration === 'bank-a');
  assert.equal(bankA.baseline.count, 100);
  within(bankA.baseline.p50Ms, 50);
  within(bankA.baseline.p95Ms, 95);
  within(bankA.baseline.p99Ms, 99);
  within(bankA.candidate.p50Ms, 75);
  within(bankA.ratio.p50, 1.5, 0.1);
  within(bankA.ratio.p95, 1.5, 0.1);
  const bankB = view.integrations.find((i: { integration: string }) => i.integration === 'bank-b');
  assert.deepEqual([bankB.baseline, bankB.ratio], [null, null], 'no ratio without both clusters');
  assert.equal(view.clusters.candidate.count, 200);

  for (const [query, message] of [
    ['?window=2d', /expected a duration such as 30s, 5m or 1h/],
    ['?window=5s', /from 10s to 1h/],
    ['?window=2h', /from 10s to 1h/],
    ['?span=5m', /unknown field/],
  ] as const) {
    const bad = await stack.api('GET', `/latency${query}`);
    assert.equal(bad.status, 400, query);
    assert.match(bad.body.error.message, message);
  }
  assert.equal((await stack.api('GET', '/latency', undefined, null)).status, 401);
});

test('GET /latency/series: complete slots oldest first, with tasks and errors per second and the ratio per integration', async (t) => {
  const stack = await startStack(t, unleash, { latencySettleMs: 1000 });
  const keyPrefix = stack.fleet.ledgerOptions.keyPrefix!;
  const baseline = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster: 'baseline' });
  const candidate = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster: 'candidate' });
  const slotMs = 10_000;
  const now = Date.now();
  const current = now - (now % slotMs);
  // Two slots ago: 100 tasks on each cluster, the candidate's 2x slower, 10 failures on the
  // baseline. One slot ago: the baseline only. The current slot is not complete: left out.
  const older = current - 2 * slotMs;
  for (let i = 0; i < 100; i++) {
    baseline.record('bank-a', 40, older + i);
    candidate.record('bank-a', 80, older + i);
  }
  for (let i = 0; i < 10; i++) baseline.recordFailure('bank-a', older + i);
  for (let i = 0; i < 50; i++) baseline.record('bank-b', 10, current - slotMs + i);
  baseline.record('bank-a', 10, current);
  await Promise.all([baseline.flush(), candidate.flush()]);

  const response = await stack.api('GET', '/latency/series?window=1m');
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const series = response.body;
  assert.equal(series.slotSeconds, 10);
  const starts = series.slots.map((slot: { startUnixMs: number }) => slot.startUnixMs);
  assert.deepEqual(
    starts,
    [...starts].sort((a, b) => a - b),
    'oldest first',
  );
  const last = starts.at(-1);
  assert.ok(
    last === current - slotMs || (last === current - 2 * slotMs && Date.now() - current < 1000),
    `the newest complete slot, not the current one: ${last} vs ${current}`,
  );
  const first = series.slots.find((slot: { startUnixMs: number }) => slot.startUnixMs === older);
  assert.deepEqual([first.baseline.tasksPerSecond, first.baseline.errorsPerSecond, first.candidate.tasksPerSecond], [11, 1, 10]);
  within(first.baseline.p50Ms, 40);
  within(first.candidate.p95Ms, 80);
  within(first.integrations['bank-a'].p50, 2, 0.1);
  const second = series.slots.find((slot: { startUnixMs: number }) => slot.startUnixMs === current - slotMs);
  if (second) {
    assert.deepEqual(second.integrations['bank-b'], { p50: null, p95: null }, 'no ratio without both clusters');
    assert.deepEqual([second.candidate.tasksPerSecond, second.candidate.p50Ms], [0, null]);
  }
  const bad = await stack.api('GET', '/latency/series?window=3h');
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /from 10s to 1h/);
});

test('end to end: real workers report what they ran, and the ratio shows the slower cluster', async (t) => {
  const stack = await startStack(t, unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 10, latencyReportIntervalMs: 200 });
  await fleet.addWorker({ cluster: 'candidate', maxParallelism: 10, latencyReportIntervalMs: 200 });
  await fleet.addBalancer({}, (await stack.newFlagClient()).flags);
  await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 50 } });
  await eventually('both clusters get bank-a', 8000, async () => {
    const clusters = new Set(
      await mapLimit(
        Array.from({ length: 20 }, (_, i) => i),
        10,
        async (i) => {
          const result = await submit(fleet.clients[0]!, task({ integration: 'bank-a', key: `probe-${i}` }));
          return result.ok ? result.response.placement!.cluster : 'failed';
        },
      ),
    );
    return clusters.has('baseline') && clusters.has('candidate') ? true : undefined;
  });
  // 80 tasks on fixed keys: the candidate's handler sleeps 60 ms, the baseline's 30 ms.
  const results = await mapLimit(
    Array.from({ length: 80 }, (_, i) => i),
    10,
    async (i) => {
      const probe = await submit(fleet.clients[0]!, task({ integration: 'bank-a', key: `k-${i}`, payload: json({}) }));
      const cluster = probe.ok ? probe.response.placement!.cluster : 'baseline';
      return submit(fleet.clients[0]!, task({ integration: 'bank-a', key: `k-${i}`, payload: json({ sleepMs: cluster === 'candidate' ? 60 : 30 }) }));
    },
  );
  assert.ok(results.every((r) => r.ok));
  const view = await eventually('reported', 5000, async () => {
    const body = (await stack.api('GET', '/latency?window=1m')).body;
    const bankA = body.integrations.find((i: { integration: string }) => i.integration === 'bank-a');
    return bankA?.ratio && bankA.baseline.count + bankA.candidate.count >= 180 ? bankA : undefined;
  });
  assert.ok(view.candidate.p95Ms >= 55, `candidate p95 ${view.candidate.p95Ms}`);
  assert.ok(view.ratio.p95 > 1.3, `ratio ${JSON.stringify(view.ratio)}`);
});

test('GET /latency/series: the clusters compared over the integrations both ran, the candidate weighted to the baseline mix', async (t) => {
  const stack = await startStack(t, unleash, { latencySettleMs: 1000 });
  const keyPrefix = stack.fleet.ledgerOptions.keyPrefix!;
  const baseline = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster: 'baseline' });
  const candidate = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster: 'candidate' });
  // One slot, 30 s ago. Same banks, same speeds on both; the mixes alone differ:
  // the baseline runs mostly the fast bank-a, the candidate mostly the slow bank-c. bank-b is the baseline's only.
  const at = Date.now() - 30_000;
  for (let i = 0; i < 90; i++) {
    baseline.record('bank-a', 100, at);
    candidate.record('bank-c', 1000, at);
    baseline.record('bank-b', 5000, at);
  }
  for (let i = 0; i < 10; i++) {
    baseline.record('bank-c', 1000, at);
    candidate.record('bank-a', 100, at);
  }
  await Promise.all([baseline.flush(), candidate.flush()]);

  const series = await eventually('the slot complete', 10_000, async () => {
    const body = (await stack.api('GET', '/latency/series?window=1m')).body;
    return body.slots.some((slot: { candidate: { tasksPerSecond: number } }) => slot.candidate.tasksPerSecond > 0) ? body : undefined;
  });
  const slot = series.slots.find((s: { candidate: { tasksPerSecond: number } }) => s.candidate.tasksPerSecond > 0);
  // Over all its tasks the candidate's p50 is ten times the like-for-like one: it ran mostly the slow bank.
  within(slot.candidate.p50Ms, 1000);
  // Over the same integrations at the same weights, both clusters have the same latency.
  within(slot.sameMix.baselineP50Ms, 100);
  within(slot.sameMix.candidateP50Ms, 100);
  within(slot.sameMix.baselineP95Ms, 1000);
  within(slot.sameMix.candidateP95Ms, 1000);
  assert.deepEqual(series.mix, { compared: ['bank-a', 'bank-c'], baselineOnly: ['bank-b'], candidateOnly: [] });
});
