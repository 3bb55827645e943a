import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { eventually, type Fleet, followEvents, handlersPaths, json, type Stack, startStack, submit, task } from '@headroom/testkit';
import { controlKeys, ledgerDefaults } from '@headroom/fleet';
import type { HandlerMap } from '@headroom/worker';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { unleashProxy } from './unleash-proxy';

const demo = (require(handlersPaths.demo) as { handlers: HandlerMap }).handlers;

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/** Demo handlers that note when each task started, on which cluster (the workers' own record). */
function recording(starts: { cluster: string; atMs: number; taskId: string }[]): HandlerMap {
  return { '*': (t, signal) => (starts.push({ cluster: t.cluster, atMs: Date.now(), taskId: t.id }), demo['*']!(t, signal)) };
}

async function clusterOf(fleet: Fleet, balancer: number, integration: string, key = 'k') {
  const result = await submit(fleet.clients[balancer]!, task({ integration, key }));
  assert.ok(result.ok, JSON.stringify(result));
  return result.response.placement!.cluster;
}

/** Three balancers with flags, a one-slot candidate worker and a roomy baseline worker. */
async function rolloutStack(t: import('node:test').TestContext, starts: { cluster: string; atMs: number; taskId: string }[]): Promise<Stack> {
  const stack = await startStack(t, unleash);
  await stack.fleet.addWorker({ cluster: 'candidate', workerId: 'cand-1', maxParallelism: 1 }, recording(starts));
  await stack.fleet.addWorker({ cluster: 'baseline', workerId: 'base-1', maxParallelism: 20 }, recording(starts));
  for (let i = 0; i < 3; i++) await stack.fleet.addBalancer({ balancerId: `b${i}` }, (await stack.newFlagClient()).flags);
  return stack;
}

test('POST /rollback: every balancer acknowledges, queued candidate tasks go to the baseline, running ones finish, nothing more reaches the candidate', async (t) => {
  const starts: { cluster: string; atMs: number; taskId: string }[] = [];
  const stack = await rolloutStack(t, starts);
  const { fleet } = stack;
  assert.equal((await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 100 } })).status, 200);
  await eventually('every balancer sends bank-a to the candidate', 8000, async () => {
    for (let b = 0; b < 3; b++) if ((await clusterOf(fleet, b, 'bank-a')) !== 'candidate') return undefined;
    return true;
  });

  const probesOnCandidate = starts.filter((s) => s.cluster === 'candidate').length;
  // One long task holds the candidate's only slot; six more wait for it, spread over the balancers.
  const long = submit(fleet.clients[0]!, task({ integration: 'bank-a', payload: json({ sleepMs: 1500 }) }));
  await eventually('the long task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const queued = Array.from({ length: 6 }, (_, i) => submit(fleet.clients[i % 3]!, task({ integration: 'bank-a', payload: json({ sleepMs: 10 }) })));
  await eventually('six tasks queued for the candidate', 3000, () =>
    fleet.balancers.reduce((sum, b) => sum + b.stats().queue.queued, 0) === 6 ? true : undefined,
  );

  const response = await stack.api('POST', '/rollback', { reason: 'latency ratio 1.8 on bank-a' });
  const answeredAtMs = Date.now();
  assert.equal(response.status, 200, JSON.stringify(response.body));
  const record = response.body;
  assert.deepEqual(record.acknowledged.map((a: { balancerId: string }) => a.balancerId).sort(), ['b0', 'b1', 'b2']);
  assert.deepEqual(record.missing, []);
  assert.deepEqual([record.kind, record.scope, record.reason, record.durable], ['rollback', 'all', 'latency ratio 1.8 on bank-a', 'pending']);
  assert.ok(record.propagationMs >= 0 && record.propagationMs < 1000, `propagation ${record.propagationMs} ms`);
  for (const balancer of fleet.balancers) assert.equal(balancer.stats().overrideVersion, record.overrideVersion);

  const moved = await Promise.all(queued);
  for (const result of moved) {
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.response.placement!.cluster, 'baseline');
  }
  assert.equal(
    fleet.balancers.reduce((sum, b) => sum + b.stats().rerouted, 0),
    6,
  );
  const longResult = await long;
  assert.ok(longResult.ok && longResult.response.placement!.cluster === 'candidate', 'the running task finished where it was');
  for (let b = 0; b < 3; b++) assert.equal(await clusterOf(fleet, b, 'bank-a', `fresh-${b}`), 'baseline');
  const candidateStarts = starts.filter((s) => s.cluster === 'candidate');
  assert.equal(candidateStarts.length, probesOnCandidate + 1, 'the probes and the long task, all before the rollback');
  assert.ok(candidateStarts.every((s) => s.atMs < answeredAtMs));

  // Durable too, right after the answer: the flag's environment is off in Unleash; GET /traffic shows it all.
  await eventually('the rollback is durable', 5000, async () =>
    (await stack.api('GET', '/traffic')).body.lastRollback?.durable === 'done' ? true : undefined,
  );
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.equal(traffic.flag.enabled, false);
  assert.equal(traffic.override.all, true);
  assert.equal(traffic.durable, true);
  assert.deepEqual(traffic.effectivePercent, { default: 0, integrations: { 'bank-a': 0, 'bank-b': 0 } });
  assert.ok(traffic.balancers.every((b: { upToDate: boolean }) => b.upToDate));
  assert.equal(traffic.unleashWritesPending, 0);
  assert.deepEqual(
    [traffic.lastRollback.overrideVersion, traffic.lastRollback.reason, traffic.lastRollback.durableError],
    [record.overrideVersion, 'latency ratio 1.8 on bank-a', null],
  );
  const audit = (await stack.api('GET', '/audit?limit=1')).body.entries[0];
  assert.deepEqual(
    [audit.action, audit.target, audit.actor, audit.outcome, audit.reason, audit.after.durable],
    ['rollback', 'all', 'olga', 'ok', 'latency ratio 1.8 on bank-a', 'done'],
  );

  const resumed = await stack.api('POST', '/resume', { reason: 'bank-a upstream fixed' });
  assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
  assert.deepEqual([resumed.body.kind, resumed.body.override.all, resumed.body.acknowledged.length, resumed.body.durable], ['resume', false, 3, 'pending']);
  await eventually('the flag is on again in Unleash', 5000, async () => ((await stack.api('GET', '/traffic')).body.flag.enabled === true ? true : undefined));
  await eventually('the resume is audited with its reason', 3000, async () => {
    const entry = (await stack.api('GET', '/audit?limit=1')).body.entries[0];
    return entry.action === 'resume' && entry.reason === 'bank-a upstream fixed' && entry.outcome === 'ok' ? true : undefined;
  });
  await eventually('bank-a on the candidate again', 8000, async () => ((await clusterOf(fleet, 1, 'bank-a')) === 'candidate' ? true : undefined));
});

test('rolling back one integration leaves the others; it is durable as that strategy switched off', async (t) => {
  const stack = await rolloutStack(t, []);
  const { fleet } = stack;
  await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 100, 'bank-b': 100 } });
  await eventually('both on the candidate, on every balancer', 8000, async () => {
    for (let b = 0; b < 3; b++)
      if ((await clusterOf(fleet, b, 'bank-a')) !== 'candidate' || (await clusterOf(fleet, b, 'bank-b')) !== 'candidate') return undefined;
    return true;
  });

  const response = await stack.api('POST', '/rollback', { integration: 'bank-a' });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  assert.equal(response.body.scope, 'bank-a');
  assert.equal(await clusterOf(fleet, 0, 'bank-a'), 'baseline', 'at once, through the override');
  assert.equal(await clusterOf(fleet, 2, 'bank-b'), 'candidate');
  await eventually('the rollback is durable', 5000, async () =>
    (await stack.api('GET', '/traffic')).body.lastRollback?.durable === 'done' ? true : undefined,
  );
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.deepEqual(traffic.flag.integrations['bank-a'], { percent: 100, rolledBack: true });
  assert.deepEqual(traffic.effectivePercent.integrations, { 'bank-a': 0, 'bank-b': 100 });
  assert.deepEqual(traffic.override.integrations, ['bank-a']);

  // With every integration rolled back, one alone cannot be resumed; all can, and bank-a stays back.
  await stack.api('POST', '/rollback', {});
  const refused = await stack.api('POST', '/resume', { integration: 'bank-b' });
  assert.equal(refused.status, 409);
  assert.match(refused.body.error.message, /resume all/);
  assert.equal((await stack.api('POST', '/resume', {})).status, 200);
  assert.equal(await clusterOf(fleet, 1, 'bank-a'), 'baseline');
  await eventually('bank-b back on the candidate', 8000, async () => ((await clusterOf(fleet, 1, 'bank-b')) === 'candidate' ? true : undefined));
  assert.equal((await stack.api('POST', '/resume', { integration: 'bank-a' })).status, 200);
  // The answer comes once the balancers lifted the override; Unleash follows.
  await eventually('bank-a on again in Unleash', 5000, async () =>
    (await stack.api('GET', '/traffic')).body.flag.integrations['bank-a'].rolledBack === false ? true : undefined,
  );
  assert.deepEqual((await stack.api('GET', '/traffic')).body.flag.integrations['bank-a'], { percent: 100, rolledBack: false });
  await eventually('bank-a back on the candidate', 8000, async () => ((await clusterOf(fleet, 1, 'bank-a')) === 'candidate' ? true : undefined));
});

test('a rollback and a resume answer once the balancers acknowledge, not when Unleash does; the event stream says when each became durable', async (t) => {
  const proxy = await unleashProxy(t, unleash);
  const stack = await startStack(t, proxy.unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'candidate', maxParallelism: 4 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  for (let i = 0; i < 2; i++) await fleet.addBalancer({ balancerId: `b${i}` }, (await stack.newFlagClient()).flags);
  assert.equal((await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 100 } })).status, 200);
  const events = await followEvents(t, stack);
  await eventually('the event stream is open', 3000, () => events.find((e) => e.event === 'figures'));

  // Unleash now takes 1.5 s to answer each write, as a loaded one might.
  const unleashWriteMs = 1500;
  proxy.writes = { mode: 'delay', delayMs: unleashWriteMs };
  for (const [path, body, kind] of [
    ['/rollback', { integration: 'bank-a', reason: 'p95 ratio 1.9 on bank-a' }, 'rollback'],
    ['/resume', { integration: 'bank-a', reason: 'false alarm' }, 'resume'],
  ] as const) {
    const writesBefore = proxy.writesSeen;
    const sentAt = performance.now();
    const answer = await stack.api('POST', path, body);
    const answerMs = performance.now() - sentAt;
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    assert.ok(answerMs < unleashWriteMs / 2, `${path} answered after ${answerMs.toFixed(0)} ms: it waited for Unleash`);
    assert.deepEqual(
      [answer.body.kind, answer.body.scope, answer.body.reason, answer.body.durable, answer.body.durableError],
      [kind, 'bank-a', body.reason, 'pending', null],
    );
    assert.deepEqual(answer.body.acknowledged.map((a: { balancerId: string }) => a.balancerId).sort(), ['b0', 'b1']);
    for (const balancer of fleet.balancers)
      assert.equal(balancer.stats().overrideVersion, answer.body.overrideVersion, 'every balancer applied it before the answer');
    const pendingTraffic = (await stack.api('GET', '/traffic')).body;
    assert.equal(pendingTraffic.unleashWritesPending, 1, 'the Unleash write is under way');

    const durable = await eventually(`${kind} durable`, 10_000, () =>
      events.find((e) => e.event === 'override-change' && e.data.overrideVersion === answer.body.overrideVersion && e.data.durable !== 'pending'),
    );
    assert.equal(durable.data.durable, 'done', JSON.stringify(durable.data));
    assert.ok(durable.data.durableAtUnixMs - durable.data.atUnixMs >= unleashWriteMs - 50, 'durable once Unleash answered');
    assert.ok(
      events.some((e) => e.event === 'override-change' && e.data.overrideVersion === answer.body.overrideVersion && e.data.durable === 'pending'),
      'the answer went out on the stream too',
    );
    assert.ok(proxy.writesSeen > writesBefore, 'Unleash was written');
    const traffic = (await stack.api('GET', '/traffic')).body;
    assert.deepEqual([traffic.durable, traffic.unleashWritesPending, traffic.flag.integrations['bank-a'].rolledBack], [true, 0, kind === 'rollback']);
    const change = events.findLast((e) => e.event === 'change')!.data;
    assert.deepEqual([change.action, change.target, change.reason, change.outcome], [kind, 'bank-a', body.reason, 'ok']);
  }
  assert.equal((await stack.api('GET', '/traffic')).body.lastRollback.reason, 'p95 ratio 1.9 on bank-a');
});

test('a rollback whose Unleash write fails still answers 200 at once, holds through Redis, and says it is not durable', async (t) => {
  const proxy = await unleashProxy(t, unleash);
  const stack = await startStack(t, proxy.unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'candidate', maxParallelism: 4 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  await fleet.addBalancer({ balancerId: 'b0' }, (await stack.newFlagClient()).flags);
  assert.equal((await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 100 } })).status, 200);
  await eventually('bank-a on the candidate', 8000, async () => ((await clusterOf(fleet, 0, 'bank-a')) === 'candidate' ? true : undefined));

  proxy.writes = { mode: 'fail', status: 503 };
  const answer = await stack.api('POST', '/rollback', { reason: 'error rate' });
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  assert.equal(answer.body.durable, 'pending');
  assert.equal(await clusterOf(fleet, 0, 'bank-a'), 'baseline', 'in effect through Redis');
  const record = await eventually('the failure is known', 8000, async () => {
    const last = (await stack.api('GET', '/traffic')).body.lastRollback;
    return last?.durable === 'failed' ? last : undefined;
  });
  assert.match(record.durableError, /in effect through Redis \(override version \d+, acknowledged by 1 of 1 balancers\), but Unleash could not be updated/);
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.deepEqual([traffic.durable, traffic.flag.enabled, traffic.override.all], [false, true, true]);
  const audit = (await stack.api('GET', '/audit?limit=1')).body.entries[0];
  assert.deepEqual([audit.action, audit.outcome, audit.reason, audit.after.durable], ['rollback', 'failed', 'error rate', 'failed']);
  assert.match(audit.error, /Roll back again to retry/);
  const metrics = (await stack.api('GET', '/metrics', undefined, null)).body as string;
  assert.match(metrics, /headroom_control_rollbacks_total\{scope="all",outcome="not-durable"\} 1/);
  assert.match(metrics, /headroom_control_override_unleash_write_seconds_count\{kind="rollback",outcome="failed"\} 1/);

  // Unleash takes writes again: rolling back again makes it durable.
  proxy.writes = { mode: 'pass' };
  assert.equal((await stack.api('POST', '/rollback', {})).status, 200);
  await eventually('durable now', 8000, async () => ((await stack.api('GET', '/traffic')).body.durable === true ? true : undefined));
  assert.equal((await stack.api('GET', '/traffic')).body.flag.enabled, false);
});

test('a balancer started after a rollback applies it before its first task; a lost override is rebuilt from Unleash', async (t) => {
  const stack = await startStack(t, unleash, { overrideCheckIntervalMs: 200 });
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'candidate', maxParallelism: 5 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 5 });
  const rolledBack = (await stack.api('POST', '/rollback', { integration: 'bank-b' })).body;
  assert.deepEqual(rolledBack.acknowledged, [], 'no balancer was running');
  assert.equal(rolledBack.propagationMs, null);

  // No flags at all here: a static 100% split, which the override must beat from the first task.
  const late = await fleet.addBalancer({ candidatePercent: 100 });
  assert.equal(late.stats().overrideVersion, rolledBack.overrideVersion);
  assert.equal(await clusterOf(fleet, 0, 'bank-b'), 'baseline');
  assert.equal(await clusterOf(fleet, 0, 'bank-a'), 'candidate');

  // Redis loses the override (a FLUSHALL, a failover): the control plane writes it again from Unleash.
  await fleet.redis.del(controlKeys(fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix).override);
  await eventually('override rebuilt', 5000, async () =>
    (await stack.api('GET', '/traffic')).body.override?.integrations?.[0] === 'bank-b' ? true : undefined,
  );
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.ok(traffic.override.version > rolledBack.overrideVersion);
  assert.equal(traffic.override.actor, 'control-plane');
  await eventually('the balancer applied the rebuilt version', 3000, () => (late.stats().overrideVersion === traffic.override.version ? true : undefined));
  assert.equal(await clusterOf(fleet, 0, 'bank-b'), 'baseline');
  const audit = (await stack.api('GET', '/audit?limit=1')).body.entries[0];
  assert.deepEqual([audit.action, audit.actor], ['override.rebuild', 'control-plane']);
});

test('the event stream sends live figures, each change and each acknowledgement', async (t) => {
  const stack = await rolloutStack(t, []);
  const events = await followEvents(t, stack);
  await eventually('first figures', 3000, () => events.find((e) => e.event === 'figures'));
  const figures = events.find((e) => e.event === 'figures')!.data;
  assert.deepEqual(
    figures.clusters.map((c: { name: string; capacity: number }) => [c.name, c.capacity]),
    [
      ['baseline', 20],
      ['candidate', 1],
    ],
  );
  assert.equal(figures.balancers.length, 3);
  await stack.api('POST', '/rollback', { integration: 'bank-a' });
  await eventually('three acks and the change', 3000, () =>
    events.filter((e) => e.event === 'ack').length === 3 && events.some((e) => e.event === 'change') ? true : undefined,
  );
  const change = events.find((e) => e.event === 'change')!.data;
  assert.deepEqual([change.action, change.target, change.actor], ['rollback', 'bank-a', 'olga']);
});
