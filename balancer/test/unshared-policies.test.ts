import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { eventually, heldHandlers, startFleet, submit, task, type SubmitResult } from '@headroom/testkit';

const placedOn = (result: SubmitResult) => (result.ok ? result.response.placement?.workerId : `failed: ${result.code}`);

test('plain-round-robin sends to the workers in turn, whatever they run: a busy worker queues the task (--overflow queue), and no slot is taken in the ledger', async (t) => {
  const fleet = await startFleet(t);
  const { handlers, waiting, finish } = heldHandlers();
  for (const workerId of ['w1', 'w2']) await fleet.addWorker({ cluster: 'baseline', workerId, maxParallelism: 1, overflow: 'queue' }, handlers);
  await fleet.addBalancer({ policy: 'plain-round-robin' });
  const client = fleet.clients[0]!;
  const tasks = ['t1', 't2', 't3', 't4'].map((id) => task({ id, priority: 'BACKGROUND' }));
  const answers = tasks.map((each) => submit(client, each));
  await eventually('one task running on each worker', 5000, () => (waiting.size === 2 ? true : undefined));
  assert.deepEqual(
    fleet.workers.map((w) => [w.workerId, w.stats().inflight, w.stats().queued]),
    [
      ['w1', 1, 1],
      ['w2', 1, 1],
    ],
    'two each: one running, one queued behind it',
  );
  const keys = fleet.ledger.keys('baseline');
  assert.deepEqual(await Promise.all(['w1', 'w2'].map((id) => fleet.redis.hlen(`${keys.leasesPrefix}${id}`))), [0, 0], 'no lease in the ledger');
  for (const id of ['t1', 't2', 't3', 't4']) await finish(id);
  const results = await Promise.all(answers);
  const placements = results.map(placedOn);
  assert.deepEqual(new Set([placements[0], placements[1]]).size, 2, `in turn: ${placements}`);
  assert.deepEqual([placements[2], placements[3]], [placements[0], placements[1]], 'and again in the same turn');
  const waited = results.map((r) => (r.ok ? r.response.placement!.workerQueueWaitMs : -1));
  assert.ok(waited[0] === 0 && waited[1] === 0 && waited[2]! > 0 && waited[3]! > 0, `the queued tasks report their wait in the worker: ${waited}`);
});

test("least-request sends to the worker with the fewest of this balancer's own tasks in flight", async (t) => {
  const fleet = await startFleet(t);
  const { handlers, finish } = heldHandlers();
  for (const workerId of ['w1', 'w2']) await fleet.addWorker({ cluster: 'baseline', workerId, maxParallelism: 2, overflow: 'queue' }, handlers);
  await fleet.addBalancer({ policy: 'least-request' });
  const client = fleet.clients[0]!;
  const first = submit(client, task({ id: 'held' }));
  const second = submit(client, task({ id: 'short' }));
  await finish('short');
  const heldOn = fleet.workers.find((w) => w.stats().inflight === 1)!.workerId;
  const shortOn = placedOn(await second);
  assert.notEqual(shortOn, heldOn, 'the second went to the idle worker');
  // The worker still running "held" has one of this balancer's tasks, the other none: the next goes to the other.
  const next = ['n1', 'n2'].map((id) => submit(client, task({ id })));
  for (const id of ['n1', 'n2']) await finish(id);
  const nextOn = (await Promise.all(next)).map(placedOn);
  assert.equal(nextOn[0], shortOn, `the least busy first: ${nextOn}`);
  await finish('held');
  assert.equal(placedOn(await first), heldOn);
});

test('an unknown policy name is refused, naming the choices', async (t) => {
  const fleet = await startFleet(t);
  await assert.rejects(
    fleet.addBalancer({ policy: 'fastest' as 'least-request' }),
    /policy: got "fastest", expected one of least-loaded, round-robin, random, power-of-two, plain-round-robin, least-request, least-request-p2c/,
  );
});
