/**
 * A slot this balancer frees goes to a task waiting here in the same ledger call as the release
 * (Admission.release): no round trip through the ledger's slot-freed announcement and back. The
 * ledger still decides, so a user-present task waiting on another balancer keeps its priority.
 * Both are observed from the outside: on the slot-freed pub/sub channel, and in the order tasks run.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { connected, eventually, heldHandlers, startFleet, submit, task, testRedisUrl, type Fleet } from '@headroom/testkit';

/** Every slot-freed announcement of `cluster`, by the worker named. */
async function announcements(t: TestContext, fleet: Fleet, cluster: string): Promise<string[]> {
  const listener = await connected(testRedisUrl, true);
  t.after(() => listener.disconnect());
  const seen: string[] = [];
  listener.on('message', (_channel: string, workerId: string) => seen.push(workerId));
  await listener.subscribe(fleet.ledger.keys(cluster).slotFreedChannel);
  return seen;
}

test('a slot freed by this balancer goes to the task waiting here in the same ledger call, with no slot-freed announcement', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  const { handlers, finish, waiting } = heldHandlers();
  await fleet.addWorker({ cluster: 'baseline', workerId: 'w1', maxParallelism: 1 }, handlers);
  const balancer = await fleet.addBalancer();
  const announced = await announcements(t, fleet, 'baseline');
  const client = fleet.clients[0]!;
  const first = submit(client, task({ id: 'first', priority: 'BACKGROUND' }));
  await eventually('the first task to run', 5000, () => (waiting.has('first') ? true : undefined));
  const second = submit(client, task({ id: 'second', priority: 'BACKGROUND' }));
  await eventually('the second task to wait in the balancer', 5000, () => (balancer.stats().queue.queued === 1 ? true : undefined));
  await finish('first');
  await finish('second');
  const answers = await Promise.all([first, second]);
  assert.deepEqual(
    answers.map((answer) => answer.ok && answer.response.placement?.workerId),
    ['w1', 'w1'],
  );
  // The balancer registered as waiting: a release in a call of its own would have been announced.
  assert.deepEqual(announced, [], 'the freed slot was taken in the call that freed it');
  assert.equal(balancer.stats().queue.handoffs, 1, 'one release found a task waiting here');
});

test('the hand-off keeps priority across balancers: a user-present task waiting elsewhere gets the slot before a background one waiting here', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  const { handlers, finish, waiting } = heldHandlers();
  await fleet.addWorker({ cluster: 'baseline', workerId: 'w1', maxParallelism: 1 }, handlers);
  const here = await fleet.addBalancer();
  const elsewhere = await fleet.addBalancer();
  const announced = await announcements(t, fleet, 'baseline');
  const running = submit(fleet.clients[0]!, task({ id: 'running', priority: 'BACKGROUND' }));
  await eventually('the first task to run', 5000, () => (waiting.has('running') ? true : undefined));
  const background = submit(fleet.clients[0]!, task({ id: 'background-here', priority: 'BACKGROUND' }));
  await eventually('a background task to wait here', 5000, () => (here.stats().queue.queued === 1 ? true : undefined));
  const userPresent = submit(fleet.clients[1]!, task({ id: 'user-present-elsewhere', priority: 'USER_PRESENT' }));
  await eventually('a user-present task to wait on the other balancer', 5000, () => (elsewhere.stats().queue.queued === 1 ? true : undefined));
  await finish('running');
  await eventually('the next task to run', 5000, () => (waiting.has('user-present-elsewhere') || waiting.has('background-here') ? true : undefined));
  assert.ok(waiting.has('user-present-elsewhere') && !waiting.has('background-here'), `ran next: ${[...waiting.keys()].join(', ')}`);
  assert.deepEqual(announced, ['w1'], 'the slot the background task here could not take was announced to the other balancer');
  await finish('user-present-elsewhere');
  await finish('background-here');
  for (const answer of await Promise.all([running, userPresent, background])) assert.ok(answer.ok, JSON.stringify(answer));
});
