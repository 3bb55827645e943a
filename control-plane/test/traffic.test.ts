import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually, mapLimit, startStack, submit, task, viewerToken } from '@headroom/testkit';
import { startFlagClient } from '@headroom/flags';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const clusterOf = async (client: Parameters<typeof submit>[0], key: string, integration: string) => {
  const result = await submit(client, task({ key, integration }));
  assert.ok(result.ok, JSON.stringify(result));
  return result.response.placement!.cluster;
};

test('GET /traffic says which balancers have the split Unleash holds: a change reaches a polling client, not a stale one; a balancer without flags says null', async (t) => {
  const stack = await startStack(t, unleash);
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  const { flags } = await stack.newFlagClient();
  // A client that fetched once and then not for 10 minutes: it keeps the old split.
  const stale = await startFlagClient(
    {
      url: unleash.url,
      clientToken: unleash.clientToken,
      appName: 'headroom-test',
      instanceId: 'stale',
      refreshIntervalMs: 600_000,
      flagNames: stack.flagNames,
    },
    {},
  );
  t.after(() => stale.close());
  await stack.fleet.addBalancer({ balancerId: 'polling', balancerHeartbeatIntervalMs: 100 }, flags);
  await stack.fleet.addBalancer({ balancerId: 'stale', balancerHeartbeatIntervalMs: 100 }, stale);
  await stack.fleet.addBalancer({ balancerId: 'static', balancerHeartbeatIntervalMs: 100 });
  const upToDate = async () =>
    Object.fromEntries(
      ((await stack.api('GET', '/traffic')).body.balancers as { balancerId: string; trafficFlagUpToDate: boolean | null }[]).map((b) => [
        b.balancerId,
        b.trafficFlagUpToDate,
      ]),
    );
  assert.deepEqual(await eventually('all three registered', 5000, async () => ((await upToDate()).polling === true ? upToDate() : undefined)), {
    polling: true,
    stale: true,
    static: null,
  });

  assert.equal((await stack.api('PUT', '/traffic', { defaultPercent: 10, integrations: { 'bank-a': 35 } })).status, 200);
  const afterChange = await eventually('the polling balancer has the change', 8000, async () => {
    const view = await upToDate();
    return view.polling ? view : undefined;
  });
  assert.deepEqual(afterChange, { polling: true, stale: false, static: null });
  assert.equal(stale.trafficSplit()?.integrations['bank-a'], 0, 'the stale client still has the old split');

  // A durable per-integration rollback switches bank-b's strategy off: the client sees it gone.
  assert.equal((await stack.api('POST', '/rollback', { integration: 'bank-b' })).status, 200);
  await eventually('Unleash has it (written after the answer)', 5000, async () =>
    (await stack.api('GET', '/traffic')).body.lastRollback?.durable === 'done' ? true : undefined,
  );
  await eventually('the polling balancer has the switched-off strategy', 8000, async () => ((await upToDate()).polling ? true : undefined));
  assert.deepEqual(flags.trafficSplit(), { enabled: true, defaultPercent: 10, integrations: { 'bank-a': 35 } });
});

test('PUT /traffic writes the Unleash flag; balancers route by it, per integration, sticky per key', async (t) => {
  const stack = await startStack(t, unleash);
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 20 });
  await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 20 });
  const { flags } = await stack.newFlagClient();
  await stack.fleet.addBalancer({}, flags);
  const client = stack.fleet.clients[0]!;

  // The control plane created the flag at 0%, switched on: everything goes to the baseline.
  const initial = await stack.api('GET', '/traffic');
  assert.equal(initial.status, 200);
  assert.deepEqual(
    { enabled: initial.body.flag.enabled, defaultPercent: initial.body.flag.defaultPercent, integrations: initial.body.flag.integrations },
    { enabled: true, defaultPercent: 0, integrations: { 'bank-a': { percent: 0, rolledBack: false }, 'bank-b': { percent: 0, rolledBack: false } } },
  );
  assert.equal(await clusterOf(client, 'k1', 'bank-a'), 'baseline');

  const put = await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 100 } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.equal(put.body.flag.integrations['bank-a'].percent, 100);
  await eventually('bank-a on the candidate', 8000, async () => ((await clusterOf(client, 'k1', 'bank-a')) === 'candidate' ? true : undefined));
  assert.equal(await clusterOf(client, 'k1', 'bank-b'), 'baseline', 'bank-b follows the default, still 0%');
  assert.equal(await clusterOf(client, 'k1', 'bank-other'), 'baseline');

  // Default 30% for integrations without a strategy of their own: a share of keys moves, and
  // each key stays where it is while the percentage grows.
  await stack.api('PUT', '/traffic', { defaultPercent: 30 });
  const keys = Array.from({ length: 200 }, (_, i) => `account-${i}`);
  const placed = async () => mapLimit(keys, 20, (key) => clusterOf(client, key, 'bank-other'));
  // Placed twice alike: the balancer was not between two versions of the flag while placing them.
  const at30 = await eventually('about 30% of the keys on the candidate, the same twice', 8000, async () => {
    const first = await placed();
    const share = first.filter((c) => c === 'candidate').length / keys.length;
    if (share < 0.15 || share > 0.45) return undefined;
    return JSON.stringify(await placed()) === JSON.stringify(first) ? first : undefined;
  });
  assert.deepEqual(await placed(), at30, 'the same keys land on the same cluster');
  assert.equal(await clusterOf(client, 'k1', 'bank-b'), 'baseline', 'bank-b has its own strategy, still 0%');
  await stack.api('PUT', '/traffic', { defaultPercent: 60 });
  let at60: string[] = [];
  await eventually('more keys move', 8000, async () => {
    at60 = await placed();
    return at60.filter((c) => c === 'candidate').length > at30.filter((c) => c === 'candidate').length + 20 ? true : undefined;
  });
  keys.forEach((key, i) => {
    if (at30[i] === 'candidate') assert.equal(at60[i], 'candidate', `${key} stayed on the candidate as the percentage grew`);
  });

  // The audit log has both changes, with actor, before and after.
  const audit = await stack.api('GET', '/audit?limit=10');
  const changes = audit.body.entries.filter((e: { action: string }) => e.action === 'traffic.set');
  assert.equal(changes.length, 3);
  assert.equal(changes[0].actor, 'olga');
  assert.equal(changes[0].before.defaultPercent, 30);
  assert.equal(changes[0].after.defaultPercent, 60);
  assert.equal(changes[2].after.integrations['bank-a'].percent, 100);
});

test('PUT /parallelism reaches the workers through Unleash: capacity follows, null returns to their own', async (t) => {
  const stack = await startStack(t, unleash);
  const { flags } = await stack.newFlagClient();
  const worker = await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 2 }, undefined, flags);
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 }, undefined, flags);
  const capacity = async (cluster: string) => (await stack.api('GET', '/clusters')).body.clusters.find((c: { name: string }) => c.name === cluster).capacity;
  assert.equal(await capacity('candidate'), 2);
  assert.deepEqual((await stack.api('GET', '/parallelism')).body, { clusters: { baseline: null, candidate: null } });

  const put = await stack.api('PUT', '/parallelism', { clusters: { candidate: 30 } });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.deepEqual(put.body, { clusters: { baseline: null, candidate: 30 } });
  await eventually('candidate capacity 30', 8000, async () => ((await capacity('candidate')) === 30 ? true : undefined));
  assert.equal(worker.stats().maxParallelism, 30);
  assert.equal(await capacity('baseline'), 1, 'the baseline cluster is not touched');

  await stack.api('PUT', '/parallelism', { clusters: { candidate: null } });
  await eventually('back to its own 2', 8000, async () => ((await capacity('candidate')) === 2 ? true : undefined));
  const audit = (await stack.api('GET', '/audit')).body.entries.filter((e: { action: string }) => e.action === 'parallelism.set');
  assert.deepEqual(
    audit.map((e: { after: unknown }) => e.after),
    [
      { baseline: null, candidate: null },
      { baseline: null, candidate: 30 },
    ],
  );
});

test('tokens: none gets 401, a viewer reads but cannot change (403), and nothing changes', async (t) => {
  const stack = await startStack(t, unleash);
  const none = await stack.api('GET', '/traffic', undefined, null);
  assert.equal(none.status, 401);
  assert.equal(none.body.error.code, 'HR_ERR_UNAUTHENTICATED');
  assert.equal((await stack.api('GET', '/traffic', undefined, 'not-a-token-at-all-xxxxxxxx')).status, 401);
  assert.equal((await stack.api('GET', '/traffic', undefined, viewerToken)).status, 200);
  for (const [method, path, body] of [
    ['PUT', '/traffic', { defaultPercent: 50 }],
    ['PUT', '/parallelism', { clusters: { candidate: 5 } }],
    ['POST', '/rollback', {}],
    ['POST', '/resume', {}],
    ['POST', '/workers/w1/drain', undefined],
  ] as const) {
    const response = await stack.api(method, path, body, viewerToken);
    assert.equal(response.status, 403, `${method} ${path}`);
    assert.equal(response.body.error.code, 'HR_ERR_FORBIDDEN');
    assert.equal((await stack.api(method, path, body, null)).status, 401, `${method} ${path} without a token`);
  }
  const traffic = await stack.api('GET', '/traffic');
  assert.equal(traffic.body.flag.defaultPercent, 0);
  assert.deepEqual([traffic.body.override.all, traffic.body.override.integrations], [false, []], 'the override written at start, nothing rolled back');
  assert.deepEqual((await stack.api('GET', '/audit')).body.entries, []);
});

test('bad bodies get 400 naming the field and what is accepted, and change nothing in Unleash', async (t) => {
  const stack = await startStack(t, unleash);
  await stack.api('PUT', '/traffic', { defaultPercent: 10, integrations: { 'bank-a': 20 } });
  const before = (await stack.api('GET', '/traffic')).body.flag;
  const cases: [string, string, unknown, string, RegExp][] = [
    ['PUT', '/traffic', { defaultPercent: 150 }, 'body.defaultPercent', /from 0 to 100/],
    ['PUT', '/traffic', { defaultPercent: 12.5 }, 'body.defaultPercent', /whole number/],
    ['PUT', '/traffic', { defaultPercent: '50' }, 'body.defaultPercent', /whole number/],
    ['PUT', '/traffic', { integrations: { 'bank-a': 50, 'bank-zzz': 50 } }, 'body.integrations.bank-zzz', /unknown integration; accepted: bank-a, bank-b/],
    ['PUT', '/traffic', { defaultPercent: 50, colour: 'red' }, 'body.colour', /unknown field; accepted: defaultPercent, integrations/],
    ['PUT', '/traffic', {}, 'body.defaultPercent', /defaultPercent and\/or integrations/],
    ['PUT', '/parallelism', { clusters: { candidate: -1 } }, 'body.clusters.candidate', /from 1 to 10000/],
    ['PUT', '/parallelism', { clusters: { candidate: 2.5 } }, 'body.clusters.candidate', /whole number/],
    ['PUT', '/parallelism', { clusters: { candidate: 5, nowhere: 5 } }, 'body.clusters.nowhere', /unknown cluster; accepted: baseline, candidate/],
    ['PUT', '/parallelism', {}, 'body.clusters', /required/],
    ['POST', '/rollback', { integration: 'bank-zzz' }, 'body.integration', /unknown integration/],
    ['GET', '/audit?limit=0', undefined, 'query.limit', /from 1 to 1000/],
  ];
  for (const [method, path, body, field, message] of cases) {
    const response = await stack.api(method, path, body);
    assert.equal(response.status, 400, `${method} ${path} ${JSON.stringify(body)}: ${JSON.stringify(response.body)}`);
    assert.equal(response.body.error.code, 'HR_ERR_INVALID_REQUEST');
    const problem = response.body.error.fields.find((f: { field: string }) => f.field === field);
    assert.ok(problem, `${JSON.stringify(body)} names ${field}: ${JSON.stringify(response.body.error)}`);
    assert.match(problem.message, message);
  }
  const notJson = await stack.api('PUT', '/traffic', '{"defaultPercent": 5', undefined);
  assert.equal(notJson.status, 400);
  assert.match(notJson.body.error.message, /not valid JSON/);
  const wrongType = await stack.api('PUT', '/traffic', 'defaultPercent=5', undefined, { 'content-type': 'application/x-www-form-urlencoded' });
  assert.equal(wrongType.status, 415);
  const huge = await stack.api('PUT', '/traffic', { defaultPercent: 5, padding: 'x'.repeat(100_000) });
  assert.equal(huge.status, 413);

  assert.deepEqual((await stack.api('GET', '/traffic')).body.flag, before, 'nothing changed in Unleash');
  assert.deepEqual((await stack.api('GET', '/parallelism')).body.clusters, { baseline: null, candidate: null });
  assert.equal((await stack.api('GET', '/audit')).body.entries.length, 1, 'only the first, valid change is recorded');
});

test('the API documents itself; health, readiness and metrics answer without a token', async (t) => {
  const stack = await startStack(t, unleash);
  const document = await stack.api('GET', '/openapi.json', undefined, null);
  assert.equal(document.status, 200);
  assert.equal(document.body.openapi, '3.1.0');
  for (const path of [
    '/clusters',
    '/workers',
    '/workers/{workerId}/drain',
    '/traffic',
    '/parallelism',
    '/rollback',
    '/resume',
    '/audit',
    '/events',
    '/limits',
    '/limits/{cluster}/{integration}/series',
    '/healthz',
    '/readyz',
    '/metrics',
  ]) {
    assert.ok(document.body.paths[path], `documents ${path}`);
  }
  const trafficBody = document.body.paths['/traffic'].put.requestBody.content['application/json'].schema;
  assert.deepEqual(Object.keys(trafficBody.properties).sort(), ['defaultPercent', 'integrations']);
  assert.equal(trafficBody.additionalProperties, false);
  assert.deepEqual((await stack.api('GET', '/healthz', undefined, null)).body, { ok: true });
  assert.deepEqual((await stack.api('GET', '/readyz', undefined, null)).body, {
    ready: true,
    redis: true,
    unleash: true,
    database: true,
    flags: true,
    auditOutbox: 0,
  });
  const metrics = await stack.api('GET', '/metrics', undefined, null);
  assert.match(String(metrics.body), /headroom_control_rollback_propagation_seconds/);
  assert.equal((await stack.api('GET', '/nothing-here')).status, 404);
});

test('draining a worker through the API: it stops taking tasks and leaves; an unknown one is 404', async (t) => {
  const stack = await startStack(t, unleash);
  const worker = await stack.fleet.addWorker({ cluster: 'baseline', workerId: 'w-drain', maxParallelism: 2 });
  const workers = await stack.api('GET', '/workers');
  assert.deepEqual(
    workers.body.workers.map((w: { workerId: string; cluster: string; maxParallelism: number }) => [w.workerId, w.cluster, w.maxParallelism]),
    [['w-drain', 'baseline', 2]],
  );
  const drained = await stack.api('POST', '/workers/w-drain/drain', { reason: 'host to be patched' });
  assert.deepEqual(drained.body, { workerId: 'w-drain', cluster: 'baseline', draining: true });
  await worker.stopped;
  const missing = await stack.api('POST', '/workers/nobody/drain');
  assert.equal(missing.status, 404);
  const audit = (await stack.api('GET', '/audit')).body.entries;
  assert.deepEqual(
    audit.map((e: { action: string; target: string; reason?: string }) => [e.action, e.target, e.reason]),
    [['worker.drain', 'w-drain', 'host to be patched']],
  );
});

test('with no integrations of their own configured, the default share alone decides', async (t) => {
  const stack = await startStack(t, unleash, { integrations: [] });
  await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 4 });
  await stack.fleet.addBalancer({}, (await stack.newFlagClient()).flags);
  const put = await stack.api('PUT', '/traffic', { defaultPercent: 100 });
  assert.equal(put.status, 200, JSON.stringify(put.body));
  assert.deepEqual(put.body.flag.integrations, {});
  await eventually('everything on the candidate', 8000, async () =>
    (await clusterOf(stack.fleet.clients[0]!, 'k', 'bank-a')) === 'candidate' ? true : undefined,
  );
  const unknown = await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 5 } });
  assert.equal(unknown.status, 400);
  assert.match(unknown.body.error.fields[0].message, /unknown integration; accepted: \(none configured\)/);
});
