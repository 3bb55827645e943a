import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { ConfigError } from '@headroom/common';
import { OverrideStore, ledgerDefaults } from '@headroom/fleet';
import { connected, eventually, json, mapLimit, startFleet, testRedisUrl } from '@headroom/testkit';
import { InvalidTaskError, ShuttingDownError, TaskFailedError } from '../src/index';
import { createProxylessClient, type ProxylessClientOptions } from '../src/proxyless/index';
import { startModeFleet, type Front } from './fronts';

test('a balancer and a proxyless client on one ledger never over-admit together', async (t) => {
  const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
  const capacities = [1, 2, 3, 4];
  for (const maxParallelism of capacities) await fleet.addWorker({ cluster: 'baseline', maxParallelism });
  const fronts: Front[] = [await addFront('balancer'), await addFront('proxyless')];
  const tasks = Array.from({ length: 300 }, (_, i) => ({
    integration: 'bank-a',
    key: `account-${i}`,
    priority: i % 4 ? ('BACKGROUND' as const) : ('USER_PRESENT' as const),
    payload: json({ sleepMs: 5 + (i % 5) * 4 }),
  }));
  // 40 in flight against 10 slots, half through each front.
  const results = await mapLimit(tasks, 40, (r, i) => fronts[i % 2]!.settle(r));
  const failures = results.filter((r) => !r.ok);
  assert.equal(
    failures.length,
    0,
    failures
      .slice(0, 3)
      .map((f) => (f.ok ? '' : `${f.error.code}: ${f.error.message}`))
      .join('\n'),
  );
  for (const [i, worker] of fleet.workers.entries()) {
    assert.ok(worker.stats().highWaterMark <= capacities[i]!, `${worker.workerId} ran ${worker.stats().highWaterMark} at once, max ${capacities[i]}`);
  }
  const byMode = results.map((r, i) => (r.ok ? `${fronts[i % 2]!.mode}:${r.result.balancer.startsWith('proxyless:') ? 'proxyless' : 'balancer'}` : 'failed'));
  assert.ok(
    byMode.every((m) => m === 'balancer:balancer' || m === 'proxyless:proxyless'),
    'each answer names the front that placed it',
  );
  await eventually('all slots free', 3000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 10 ? true : undefined));
  assert.equal(
    fleet.workers.reduce((sum, w) => sum + w.stats().refusals, 0),
    0,
    'the ledger never sent a task to a full worker',
  );
});

test('priority holds across modes: a user-present task waiting in a proxyless client goes before background work from a balancer', async (t) => {
  const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  const balancer = await addFront('balancer');
  const proxyless = await addFront('proxyless');
  const order: string[] = [];
  const run = (front: Front, id: string, priority: 'USER_PRESENT' | 'BACKGROUND', sleepMs: number) =>
    front.submit({ id, integration: 'bank-a', key: id, priority, payload: json({ sleepMs }) }).then((result) => {
      order.push(id);
      return result;
    });
  // Long enough for the two others to queue and register on a loaded machine before it ends.
  const blocker = run(balancer, 'blocker', 'BACKGROUND', 2000);
  await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const background = run(balancer, 'background', 'BACKGROUND', 10);
  await eventually('background queued on the balancer', 2000, () => (balancer.engine().queue.queued === 1 ? true : undefined));
  const user = run(proxyless, 'user', 'USER_PRESENT', 10);
  await eventually('the proxyless client waits for user-present work', 2000, async () =>
    (await fleet.ledger.snapshot('baseline')).waitingUserPresentBalancers.includes(proxyless.balancerId) ? true : undefined,
  );
  await Promise.all([blocker, background, user]);
  assert.deepEqual(order, ['blocker', 'user', 'background']);
});

test("proxyless options are checked against the balancer's schema before anything starts", async (t) => {
  const fleet = await startFleet(t);
  const subscriber = await connected(testRedisUrl, true);
  t.after(() => subscriber.disconnect());
  const deps = { redis: fleet.redis, subscriber };
  const refused = async (options: ProxylessClientOptions, pattern: RegExp) => {
    await assert.rejects(createProxylessClient(options, deps), (error: unknown) => error instanceof ConfigError && pattern.test(error.message));
  };
  await refused(
    { policy: 'fastest' as never, ledger: { keyPrefix: fleet.ledgerOptions.keyPrefix! } },
    /^invalid proxyless client options:\n {2}policy: got "fastest", expected one of least-loaded/m,
  );
  await refused({ maxDispatchAttempts: 0 }, /maxDispatchAttempts: got 0, expected a number >= 1/);
  await refused({ defaultTaskTimeoutMs: 10_000, maxTaskTimeoutMs: 5_000 }, /defaultTaskTimeoutMs: .*must not exceed maxTaskTimeoutMs/);
  await refused({ port: 7001 } as never, /port: got 7001, does not apply to a proxyless client: it serves no gRPC/);
  await refused({ balancers: ['127.0.0.1:1'] } as never, /\(root\): unknown setting\(s\) "balancers"/);
  await refused({ ledger: { keptForUserPresentShare: 2 } }, /ledger\.keptForUserPresentShare: got 2, expected a number from 0 to 1/);
  await refused({ retry: { minDelayMs: 500, maxDelayMs: 100 } }, /retry\.minDelayMs must not exceed retry\.maxDelayMs/);
  await refused({ workerTls: { caFile: '/nonexistent/ca.pem' } }, /workerTls/);
  await refused(
    { queueRecheckIntervalMs: 2000, ledger: { waiterTtlMs: 3000 } },
    /queueRecheckIntervalMs \(2000\) must be at most half of the ledger's waiterTtlMs \(3000\)/,
  );
  // Nothing started: no subscription, nothing in the control plane's register.
  assert.equal(subscriber.listenerCount('message'), 0);
  const store = new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix);
  assert.deepEqual(await store.liveBalancers(60_000), []);
});

test("proxyless: a task is checked by the balancer's rules and limits; a handler failure is a TaskFailedError; closing refuses new tasks and leaves the register", async (t) => {
  const { fleet, addFront } = await startModeFleet(t);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 });
  const front = await addFront('proxyless', { maxPayloadBytes: 100, maxQueuedBytes: 1000, maxTaskTimeoutMs: 60_000 });
  const tooLarge = await front.settle({ integration: 'bank-a', key: 'k', payload: Buffer.alloc(101) });
  assert.ok(
    !tooLarge.ok && tooLarge.error instanceof InvalidTaskError && /task\.payload: 101 bytes, the limit is 100 bytes/.test(tooLarge.error.message),
    JSON.stringify(tooLarge),
  );
  assert.equal(tooLarge.ok ? 0 : tooLarge.error.attempts, 1, 'not retried');
  const badIntegration = await front.settle({ integration: 'Bank A', key: 'k' });
  assert.ok(!badIntegration.ok && badIntegration.error instanceof InvalidTaskError && /task\.integration: got "Bank A"/.test(badIntegration.error.message));
  const tooFar = await front.settle({ integration: 'bank-a', key: 'k', deadlineMs: 120_000 });
  assert.ok(!tooFar.ok && tooFar.error instanceof InvalidTaskError && /maxTaskTimeoutMs/.test(tooFar.error.message));
  assert.match(
    await front.registry.metrics(),
    /^headroom_balancer_tasks_total\{cluster="none",integration="none",priority="none",outcome="HR_ERR_INVALID_TASK"\} 3$/m,
  );
  const missingKey = await front.settle({ integration: 'bank-a', key: '' });
  assert.ok(!missingKey.ok && missingKey.error instanceof InvalidTaskError && /^key: /.test(missingKey.error.message));

  const failed = await front.settle({ integration: 'bank-a', key: 'k', payload: json({ fail: 'HR_ERR_UPSTREAM_DOWN' }) });
  assert.ok(!failed.ok && failed.error instanceof TaskFailedError && failed.error.code === 'HR_ERR_UPSTREAM_DOWN', JSON.stringify(failed));
  assert.equal(failed.ok ? '' : failed.error.balancer, front.address);
  const echoed = await front.submit({ integration: 'bank-a', key: 'k', id: 'mine' });
  assert.match(echoed.result.toString(), /"taskId":"mine"/);
  assert.equal(echoed.taskId, 'mine');
  assert.equal(echoed.balancer, front.address);
  assert.match(echoed.balancer, /^proxyless:[^:]+:\d+$/);

  const store = new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix);
  await eventually('registered', 3000, async () => ((await store.liveBalancers(5000)).length === 1 ? true : undefined));
  await front.close();
  const afterClose = await front.settle({ integration: 'bank-a', key: 'k' });
  assert.ok(!afterClose.ok && afterClose.error instanceof ShuttingDownError, JSON.stringify(afterClose));
  assert.deepEqual(await store.liveBalancers(5000), [], 'a closed client leaves the register: no rollback waits for it');
});
