/**
 * An integration at its start rate (its limit's maxStartsPerSecond), through a real balancer, real
 * workers over gRPC and the real ledger: its waiting task holds up no other integration's task
 * queued behind it, starts when the rate allows with no freed slot to wake it, and past its share
 * of the queue a task gets HR_ERR_INTEGRATION_AT_LIMIT naming the integration and its rate.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Task } from '@headroom/proto';
import { eventually, startFleet, submit, task } from '@headroom/testkit';

test("a task held at its integration's start rate does not block another integration's task queued behind it, and starts when the rate allows", async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  const running = new Map<string, () => void>();
  const hold = (held: Task) => new Promise<string>((resolve) => running.set(String(held.id), () => resolve(`done ${held.id}`)));
  const finish = (id: string) => running.get(id)!();
  await fleet.addWorker({ cluster: 'baseline', workerId: 'w1', maxParallelism: 2 }, { 'bank-a': hold, 'bank-b': hold });
  // One start every 5 s: long enough that nothing below reaches bank-a's next start by chance.
  await fleet.ledger.setIntegrationLimit('baseline', 'bank-a', { off: true, maxStartsPerSecond: 0.2 });
  const balancer = await fleet.addBalancer({ maxQueuedTasks: 4, maxQueuedShareAtLimit: 0.25 });
  const client = fleet.clients[0]!;
  const queued = (n: number) => () => (balancer.stats().queue.queued === n ? true : undefined);

  const a1 = submit(client, task({ id: 'a1' }));
  await eventually('a1 to run', 5000, () => running.has('a1') || undefined);
  const c1 = submit(client, task({ id: 'c1', integration: 'bank-b' }));
  await eventually('c1 to run (the worker is full now)', 5000, () => running.has('c1') || undefined);
  const a2 = submit(client, task({ id: 'a2' }));
  await eventually('a2 to wait for its rate', 5000, queued(1));
  const b1 = submit(client, task({ id: 'b1', integration: 'bank-b' }));
  await eventually('b1 to wait for a slot, behind a2', 5000, queued(2));

  // bank-a's share of the queue (one task) is full: the next is refused, naming its rate.
  const a3 = await submit(client, task({ id: 'a3' }));
  assert.ok(!a3.ok && a3.code === 'HR_ERR_INTEGRATION_AT_LIMIT', JSON.stringify(a3));
  assert.ok(Number(a3.retryAfterMs) >= 100, `retry after ${a3.retryAfterMs} ms`);
  assert.match(a3.details, /integration bank-a starts 0\.2 tasks per second in cluster baseline, its limit \(maxStartsPerSecond\)/);
  assert.equal(balancer.stats().queue.refusedAtRate, 1);
  const metrics = await balancer.registry.metrics();
  assert.match(metrics, /^headroom_balancer_refused_at_limit_total\{reason="rate"\} 1$/m);
  assert.match(metrics, /^headroom_balancer_refused_at_limit_total\{reason="in-flight"\} 0$/m);
  assert.match(metrics, /^headroom_ledger_integration_max_starts_per_second\{cluster="baseline",integration="bank-a"\} 0\.2$/m);

  // The slot c1 frees goes to b1, behind a2 in the queue: a2 waits for its rate, not for a slot.
  finish('c1');
  await eventually('b1 to run', 5000, () => running.has('b1') || undefined);
  assert.ok(!running.has('a2'), 'a2 started before its rate allowed');
  finish('a1');
  // a1's slot frees before bank-a's next start is due: a2 starts when the rate allows (the balancer's own timer).
  await eventually('a2 to start at its rate', 10_000, () => running.has('a2') || undefined);
  for (const id of ['a2', 'b1']) finish(id);
  const answers = await Promise.all([a1, c1, a2, b1]);
  assert.deepEqual(
    answers.map((answer) => answer.ok),
    [true, true, true, true],
  );
});
