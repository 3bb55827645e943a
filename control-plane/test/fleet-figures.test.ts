import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { eventually, json, mapLimit, startStack, submit, task, viewerToken } from '@headroom/testkit';
import { ledgerDefaults, reportKeys } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { createControlPlane } from '../src/index';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

test('GET /session says who the token belongs to; a bad token gets 401', async (t) => {
  const stack = await startStack(t, unleash);
  assert.deepEqual((await stack.api('GET', '/session')).body, { name: 'olga', role: 'operator' });
  assert.deepEqual((await stack.api('GET', '/session', undefined, viewerToken)).body, { name: 'victor', role: 'viewer' });
  assert.equal((await stack.api('GET', '/session', undefined, 'not-a-token-of-ours-at-all')).status, 401);
});

test('workers report heap, GC, event loop and task figures; clusters add them up; balancers report their queues', async (t) => {
  const stack = await startStack(t, unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'baseline', workerId: 'figures-b1', maxParallelism: 1, reportIntervalMs: 200 });
  await fleet.addWorker({ cluster: 'candidate', workerId: 'figures-c1', maxParallelism: 10, reportIntervalMs: 200 });
  await fleet.addBalancer({ balancerId: 'figures-balancer', candidatePercent: 0, balancerHeartbeatIntervalMs: 100 });
  const client = fleet.clients[0]!;

  // The baseline's single slot held by a long task: the next ones queue at the balancer.
  const long = submit(client, task({ integration: 'bank-a', priority: 'BACKGROUND', payload: json({ sleepMs: 1500 }) }));
  await eventually('the long task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const queued = [
    submit(client, task({ integration: 'bank-a', priority: 'USER_PRESENT', payload: json({ sleepMs: 1 }) })),
    ...Array.from({ length: 3 }, () => submit(client, task({ integration: 'bank-a', priority: 'BACKGROUND', payload: json({ sleepMs: 1 }) }))),
  ];
  const balancers = await eventually('the queue reported', 3000, async () => {
    const body = (await stack.api('GET', '/balancers')).body;
    return body.balancers[0]?.queued?.background === 3 ? body.balancers : undefined;
  });
  assert.deepEqual(balancers[0].queued, { userPresent: 1, background: 3 });
  await Promise.all([long, ...queued]);

  // 40 quick tasks and 10 failures on the baseline: the worker's report and the cluster's rate show them.
  const results = await mapLimit(
    Array.from({ length: 50 }, (_, i) => i),
    1,
    (i) => submit(client, task({ integration: 'bank-a', payload: json(i < 10 ? { fail: 'HR_ERR_UPSTREAM_TEST' } : { sleepMs: 5 }) })),
  );
  assert.equal(results.filter((r) => r.ok && !r.response.error).length, 40);
  const baselineWorker = await eventually('the worker reported its tasks', 3000, async () => {
    const workers = (await stack.api('GET', '/workers')).body.workers as { workerId: string; stats: Record<string, number> | null }[];
    const worker = workers.find((w) => w.workerId === 'figures-b1');
    return worker?.stats && worker.stats.tasksPerSecond > 0 ? worker : undefined;
  });
  const stats = baselineWorker.stats!;
  assert.ok(stats.heapUsedBytes! > 1e6 && stats.heapUsedBytes! < stats.heapLimitBytes!, JSON.stringify(stats));
  for (const ratio of ['gcTimeRatio', 'eventLoopUtilization'] as const) assert.ok(stats[ratio]! >= 0 && stats[ratio]! <= 1, `${ratio} ${stats[ratio]}`);
  assert.ok(stats.eventLoopDelayP99Ms! >= 0 && stats.eventLoopDelayP99Ms! < 1000, `delay ${stats.eventLoopDelayP99Ms}`);
  assert.ok(Math.abs(Date.now() - stats.atUnixMs!) < 5000);

  // Over the whole run, errors per second are 1/5 of tasks per second on the baseline worker.
  // Reports cover 200 ms each, so sum them while the tasks run again.
  let tasks = 0;
  let errors = 0;
  let latencyP50Ms = 0;
  const sums = mapLimit(
    Array.from({ length: 100 }, (_, i) => i),
    1,
    (i) => submit(client, task({ integration: 'bank-a', payload: json(i % 5 === 0 ? { fail: 'HR_ERR_UPSTREAM_TEST' } : { sleepMs: 20 }) })),
  );
  const clusters = await eventually('the cluster adds up its workers', 8000, async () => {
    const body = (await stack.api('GET', '/clusters')).body;
    const baseline = body.clusters.find((c: { role: string }) => c.role === 'baseline');
    const worker = ((await stack.api('GET', '/workers')).body.workers as { workerId: string; stats: Record<string, number> }[]).find(
      (w) => w.workerId === 'figures-b1',
    )!;
    tasks = worker.stats.tasksPerSecond!;
    errors = worker.stats.errorsPerSecond!;
    latencyP50Ms = worker.stats.latencyP50Ms ?? 0;
    // Reports of the first batch (5 ms tasks) may still be the latest: wait for one of this batch.
    return baseline.tasksPerSecond > 5 && errors > 0 && latencyP50Ms >= 15 ? body.clusters : undefined;
  });
  await sums;
  assert.ok(errors <= tasks / 2, `errors ${errors}/s of ${tasks}/s`);
  assert.ok(latencyP50Ms < 60, `p50 ${latencyP50Ms} ms for 20 ms tasks`);
  const candidate = clusters.find((c: { role: string }) => c.role === 'candidate');
  assert.equal(candidate.tasksPerSecond, 0, 'the candidate ran nothing');

  // A worker that stops takes its report with it.
  await fleet.workers[1]!.close();
  assert.equal(await fleet.redis.exists(reportKeys(fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix).worker('figures-c1')), 0);
});

test('the control plane serves the built UI: assets cached, index.html for app routes, security headers; CORS closed; /api stays JSON', async (t) => {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-ui-'));
  t.after(() => fs.rmSync(directory, { recursive: true, force: true }));
  fs.mkdirSync(path.join(directory, 'assets'));
  fs.writeFileSync(path.join(directory, 'index.html'), '<!doctype html><title>Headroom</title><script type="module" src="/assets/app-1234.js"></script>');
  fs.writeFileSync(path.join(directory, 'assets', 'app-1234.js'), 'console.log("headroom")');
  const stack = await startStack(t, unleash, { uiDirectory: directory });
  const base = stack.controlPlane.url;

  for (const route of ['/', '/workers', '/traffic?x=1']) {
    const page = await fetch(`${base}${route}`);
    assert.equal(page.status, 200, route);
    assert.match(await page.text(), /<title>Headroom<\/title>/);
    assert.equal(page.headers.get('cache-control'), 'no-cache');
    const csp = page.headers.get('content-security-policy') ?? '';
    assert.match(csp, /script-src 'self'(;|$)/);
    assert.match(csp, /style-src 'self'(;|$)/);
    assert.doesNotMatch(csp, /upgrade-insecure-requests|unsafe-inline|unsafe-eval/, csp);
    assert.equal(page.headers.get('x-frame-options'), 'SAMEORIGIN');
    assert.equal(page.headers.get('x-content-type-options'), 'nosniff');
  }
  const asset = await fetch(`${base}/assets/app-1234.js`);
  assert.equal(asset.status, 200);
  assert.match(asset.headers.get('cache-control') ?? '', /immutable/);
  assert.equal((await fetch(`${base}/assets/missing.js`)).status, 404);
  // CORS is closed: a page on another origin gets no permission to read or to send changes.
  const crossOrigin = await fetch(`${base}/api/v1/traffic`, {
    headers: { origin: 'https://evil.example', authorization: 'Bearer operator-token-0123456789abcdef' },
  });
  assert.equal(crossOrigin.headers.get('access-control-allow-origin'), null);
  const preflight = await fetch(`${base}/api/v1/rollback`, {
    method: 'OPTIONS',
    headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type' },
  });
  assert.equal(preflight.headers.get('access-control-allow-origin'), null);
  assert.equal(preflight.headers.get('access-control-allow-methods'), null);
  const missing = await stack.api('GET', '/nothing-here');
  assert.deepEqual([missing.status, missing.body.error.code], [404, 'HR_ERR_NOT_FOUND']);

  await assert.rejects(
    createControlPlane(
      {
        uiDirectory: path.join(directory, 'nope'),
        unleash: { url: unleash.url, adminToken: unleash.adminToken },
        tokens: [{ name: 'o', role: 'operator', token: 'x'.repeat(16) }],
        database: { url: stack.database.url, schema: stack.database.schema },
      },
      { redis: stack.fleet.redis, subscriber: stack.fleet.redis },
    ),
    /uiDirectory: no index.html in .*nope; build the UI with npm run build/,
  );
});

test('a worker balancers cannot reach shows as unreachable until its mark ends, and its slots leave the cluster capacity', async (t) => {
  const stack = await startStack(t, unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'baseline', workerId: 'reachable-b1', maxParallelism: 2 });
  await fleet.ledger.heartbeat('baseline', { workerId: 'unreachable-b2', address: '127.0.0.1:1', capacity: 4, draining: false, heldLeaseIds: [] });
  const mark = await fleet.ledger.markUnreachable('baseline', 'unreachable-b2', 60_000, 1);
  assert.equal(mark.result, 'marked');
  const workers = (await stack.api('GET', '/workers')).body.workers as {
    workerId: string;
    unreachableUntilUnixMs: number | null;
    ejectedReason: string | null;
  }[];
  const byId = new Map(workers.map((w) => [w.workerId, w.unreachableUntilUnixMs]));
  assert.deepEqual(workers.map((w) => [w.workerId, w.ejectedReason]).sort(), [
    ['reachable-b1', null],
    ['unreachable-b2', 'unreachable'],
  ]);
  assert.equal(byId.get('reachable-b1'), null);
  assert.ok(mark.result === 'marked' && byId.get('unreachable-b2') === mark.untilMs, JSON.stringify(workers));
  const baseline = (await stack.api('GET', '/clusters')).body.clusters.find((c: { role: string }) => c.role === 'baseline');
  assert.deepEqual([baseline.workers, baseline.drainingWorkers, baseline.capacity, baseline.free], [2, 0, 2, 2]);
  await fleet.ledger.clearUnreachable('baseline', 'unreachable-b2');
  const cleared = (await stack.api('GET', '/workers')).body.workers as { workerId: string; unreachableUntilUnixMs: number | null }[];
  assert.equal(cleared.find((w) => w.workerId === 'unreachable-b2')!.unreachableUntilUnixMs, null);
  assert.equal((await stack.api('GET', '/clusters')).body.clusters.find((c: { role: string }) => c.role === 'baseline').capacity, 6);
});
