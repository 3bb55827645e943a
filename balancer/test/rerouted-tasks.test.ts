import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually, startFleet, submit, task } from '@headroom/testkit';
import { OverrideStore, ledgerDefaults } from '@headroom/fleet';

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

test('a task a rollback moved to the baseline and that then fails is counted under the baseline', async (t) => {
  const fleet = await startFleet(t);
  // The candidate's only slot is held by a long task; the baseline has no worker at first.
  await fleet.addWorker({ cluster: 'candidate', workerId: 'cand-1', maxParallelism: 1 });
  const balancer = await fleet.addBalancer({ candidatePercent: 100 });
  const client = fleet.clients[0]!;
  const long = submit(client, task({ payload: json({ sleepMs: 1500 }) }));
  await eventually('the long task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const doomed = submit(client, task({ payload: json({ sleepMs: 10 }), deadlineUnixMs: Date.now() + 1000 }));
  await eventually('a task queued for the candidate', 3000, () => (balancer.stats().queue.queued === 1 ? true : undefined));

  await new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix).change({ operation: 'rollback-all' }, 'test');
  await eventually('the balancer applied the rollback', 3000, () => (balancer.stats().rerouted === 1 ? true : undefined));
  // In the baseline queue it finds no worker before its deadline.
  const failed = await doomed;
  assert.ok(!failed.ok, JSON.stringify(failed));
  const metrics = await balancer.registry.metrics();
  const outcome = failed.code;
  assert.match(
    metrics,
    new RegExp(`^headroom_balancer_tasks_total\\{cluster="baseline",integration="bank-a",priority="user_present",outcome="${outcome}"\\} 1$`, 'm'),
  );
  assert.doesNotMatch(
    metrics,
    new RegExp(`^headroom_balancer_tasks_total\\{cluster="candidate",integration="bank-a",priority="user_present",outcome="${outcome}"\\}`, 'm'),
  );
  assert.ok((await long).ok, 'the running task finished on the candidate');
  assert.match(
    await balancer.registry.metrics(),
    /^headroom_balancer_tasks_total\{cluster="candidate",integration="bank-a",priority="user_present",outcome="ok"\} 1$/m,
  );
});

test('tasks a rollback moved to the baseline run there in their order of arrival, on their first attempt', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'candidate', workerId: 'cand-1', maxParallelism: 1 });
  // Only bank-b goes to the candidate; the baseline has no worker at first.
  const balancer = await fleet.addBalancer({ candidatePercent: 0, candidatePercentByIntegration: { 'bank-b': 100 } });
  const client = fleet.clients[0]!;
  const long = submit(client, task({ integration: 'bank-b', payload: json({ sleepMs: 1500 }) }));
  await eventually('the long task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const finished: string[] = [];
  const queue = (id: string, integration: string) =>
    submit(client, task({ id, integration, payload: json({ sleepMs: 20 }) })).then((result) => {
      finished.push(id);
      return result;
    });
  const first = queue('first', 'bank-a');
  await eventually('first queued', 3000, () => (balancer.stats().queue.byCluster['baseline']?.userPresent === 1 ? true : undefined));
  const moved = queue('moved', 'bank-b');
  await eventually('moved queued', 3000, () => (balancer.stats().queue.byCluster['candidate']?.userPresent === 1 ? true : undefined));
  const last = queue('last', 'bank-a');
  await eventually('last queued', 3000, () => (balancer.stats().queue.byCluster['baseline']?.userPresent === 2 ? true : undefined));

  await new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix).change({ operation: 'rollback-all' }, 'test');
  await eventually('the balancer applied the rollback', 3000, () => (balancer.stats().rerouted === 1 ? true : undefined));
  assert.deepEqual(balancer.stats().queue.byCluster['baseline'], { userPresent: 3, background: 0 });
  // One slot: the three run one after the other, in the order they arrived.
  await fleet.addWorker({ cluster: 'baseline', workerId: 'base-1', maxParallelism: 1 });
  const results = await Promise.all([first, moved, last]);
  assert.deepEqual(finished, ['first', 'moved', 'last']);
  const placement = results.map((r) => (r.ok ? [r.response.placement?.cluster, r.response.placement?.workerId, r.response.placement?.attempts] : r.code));
  assert.deepEqual(placement, [
    ['baseline', 'base-1', 1],
    ['baseline', 'base-1', 1],
    ['baseline', 'base-1', 1],
  ]);
  const metrics = await balancer.registry.metrics();
  assert.match(metrics, /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="user_present",outcome="ok"\} 2$/m);
  assert.match(metrics, /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-b",priority="user_present",outcome="ok"\} 1$/m);
  assert.doesNotMatch(metrics, /outcome="HR_ERR_/);
  assert.ok((await long).ok);
});
