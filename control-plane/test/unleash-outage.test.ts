import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Registry } from 'prom-client';
import { eventually, startStack, submit, task } from '@headroom/testkit';
import { startTestUnleash } from '@headroom/unleash-local';

async function gauge(registry: Registry, name: string): Promise<number> {
  const metric = registry.getSingleMetric(name);
  assert.ok(metric, name);
  return (await metric.get()).values[0]!.value;
}

test('Unleash away: balancers and workers keep the last flags, changes get 502 and are audited, a rollback still holds through Redis', async (t) => {
  const unleash = await startTestUnleash();
  t.after(() => unleash.stop());
  const stack = await startStack(t, unleash);
  const { fleet } = stack;
  const workerFlags = await stack.newFlagClient();
  const balancerFlags = await stack.newFlagClient();
  const worker = await fleet.addWorker({ cluster: 'candidate', maxParallelism: 1 }, undefined, workerFlags.flags);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  await fleet.addBalancer({}, balancerFlags.flags);
  const clusterOf = async (integration: string) => {
    const result = await submit(fleet.clients[0]!, task({ integration }));
    assert.ok(result.ok, JSON.stringify(result));
    return result.response.placement!.cluster;
  };
  await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 100 } });
  await stack.api('PUT', '/parallelism', { clusters: { candidate: 4 } });
  await eventually('flags applied', 8000, async () => ((await clusterOf('bank-a')) === 'candidate' && worker.stats().maxParallelism === 4 ? true : undefined));
  assert.equal(await gauge(balancerFlags.registry, 'headroom_flags_unleash_reachable'), 1);

  await unleash.pause();
  await eventually('the clients notice', 5000, async () =>
    (await gauge(balancerFlags.registry, 'headroom_flags_unleash_reachable')) === 0 &&
    (await gauge(workerFlags.registry, 'headroom_flags_unleash_reachable')) === 0
      ? true
      : undefined,
  );
  // Give them several failed fetches: the last flags stay in use, nothing falls back.
  await new Promise((resolve) => setTimeout(resolve, 500));
  assert.equal(await clusterOf('bank-a'), 'candidate');
  assert.equal(await clusterOf('bank-b'), 'baseline');
  assert.equal(worker.stats().maxParallelism, 4);
  assert.equal(await gauge(balancerFlags.registry, 'headroom_flags_synchronized'), 1);
  assert.ok((await gauge(balancerFlags.registry, 'headroom_flags_seconds_since_fetch')) >= 0.4);

  const change = await stack.api('PUT', '/traffic', { integrations: { 'bank-a': 50 } });
  assert.equal(change.status, 502);
  assert.equal(change.body.error.code, 'HR_ERR_UNLEASH_FAILED');
  assert.match(change.body.error.message, /Unleash could not be reached/);
  assert.equal((await stack.api('GET', '/traffic')).status, 502);
  const ready = await stack.api('GET', '/readyz', undefined, null);
  assert.deepEqual([ready.status, ready.body.unleash, ready.body.redis], [503, false, true]);

  // A rollback now: instant through Redis, and the API says it is not durable.
  const rollback = await stack.api('POST', '/rollback', {});
  assert.equal(rollback.status, 200, JSON.stringify(rollback.body));
  assert.equal(rollback.body.durable, 'pending');
  assert.equal(await clusterOf('bank-a'), 'baseline');
  await eventually('the rollback is known not to be durable', 8000, async () =>
    (await stack.api('GET', '/audit?limit=1')).body.entries[0].action === 'rollback' ? true : undefined,
  );
  const audit = (await stack.api('GET', '/audit?limit=2')).body.entries;
  assert.deepEqual(
    audit.map((e: { action: string; outcome: string }) => [e.action, e.outcome]),
    [
      ['rollback', 'failed'],
      ['traffic.set', 'failed'],
    ],
  );
  assert.match(audit[0].error, /in effect through Redis .* acknowledged by 1 of 1 balancers/);
  assert.match(audit[1].error, /Unleash could not be reached/);

  // Unleash returns: the clients converge, the API shows the rollback is not yet durable, and repeating it makes it so.
  await unleash.resume();
  await eventually('the clients are back', 20_000, async () =>
    (await gauge(balancerFlags.registry, 'headroom_flags_unleash_reachable')) === 1 &&
    (await gauge(workerFlags.registry, 'headroom_flags_unleash_reachable')) === 1
      ? true
      : undefined,
  );
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.equal(traffic.durable, false);
  assert.equal(traffic.flag.integrations['bank-a'].percent, 100, 'the failed change did not happen');
  assert.equal(traffic.lastRollback.durable, 'failed');
  const again = await stack.api('POST', '/rollback', {});
  assert.equal(again.status, 200, JSON.stringify(again.body));
  await eventually('durable once written again', 5000, async () => ((await stack.api('GET', '/traffic')).body.durable === true ? true : undefined));
  assert.equal((await stack.api('GET', '/traffic')).body.lastRollback.durable, 'done');
  assert.equal(await clusterOf('bank-a'), 'baseline');
});
