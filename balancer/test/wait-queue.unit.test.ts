/**
 * The balancer's wait queue: order (user-present first, FIFO within a priority, moved waiters in
 * their place by arrival), and memory: a waiter that is done (served, timed out, cancelled) is let
 * go of, so what the queue holds is bounded by its live waiters, not by the tasks that passed.
 * (It kept up to 1,024 done waiters per queue, each with its task's request, lease and promise:
 * the 30-minute soak saw a balancer's heap climb by megabytes.)
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { WaitQueue, type Waiter } from '../src/wait-queue';

interface Entry extends Waiter {
  name: string;
}

let arrivals = 0;
function waiter(name: string, priority: 'user' | 'background' = 'background'): Entry {
  return { name, priority, arrival: arrivals++, done: false };
}

/** What a served waiter goes through in Admission: peeked, then removed. */
function serveNext(queue: WaitQueue<Entry>): Entry | undefined {
  const next = queue.peek();
  if (next) queue.remove(next);
  return next;
}

test('user-present waiters go first, each priority in arrival order, and a moved waiter takes its place by arrival', () => {
  const queue = new WaitQueue<Entry>();
  const early = waiter('early-background');
  const moved = waiter('moved-background');
  for (const w of [early, waiter('b1'), waiter('u1', 'user'), waiter('b2'), waiter('u2', 'user')]) queue.push(w);
  queue.insertInOrder([moved]);
  const order: string[] = [];
  for (let next = serveNext(queue); next; next = serveNext(queue)) order.push(next.name);
  assert.deepEqual(order, ['u1', 'u2', 'early-background', 'moved-background', 'b1', 'b2']);
  assert.equal(queue.size, 0);
});

/** A full garbage collection, without starting node with --expose-gc. */
function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}

test('tasks passing through the queue are let go of: it holds its live waiters and at most a few dozen done ones', async () => {
  const queue = new WaitQueue<Entry>();
  const liveTarget = 10;
  let maxHeld = 0;
  // A busy balancer: 10 tasks queued all along, 5,000 served in turn, one in 8 user-present,
  // one in 10 giving up in the middle of the queue (deadline or cancel).
  const waiting: Entry[] = [];
  const gone: WeakRef<Entry>[] = [];
  for (let i = 0; i < 5000; i++) {
    const w = waiter(`t${i}`, i % 8 === 0 ? 'user' : 'background');
    queue.push(w);
    waiting.push(w);
    if (i % 10 === 5) {
      const gaveUp = waiting.splice(Math.floor(waiting.length / 2), 1)[0]!;
      queue.remove(gaveUp);
      gone.push(new WeakRef(gaveUp));
    }
    while (queue.size > liveTarget) {
      const served = serveNext(queue)!;
      waiting.splice(waiting.indexOf(served), 1);
      gone.push(new WeakRef(served));
    }
    maxHeld = Math.max(maxHeld, queue.held);
  }
  assert.equal(queue.size, liveTarget);
  // 2 queues (user-present and background), each at most 2 x its live waiters + 32 done ones.
  assert.ok(maxHeld <= 2 * liveTarget + 2 * 32 + 1, `the queue held up to ${maxHeld} waiters with ${liveTarget} live`);
  // The waiters that are done are garbage: nothing but the queue could keep them.
  await nextTurn(); // a WeakRef keeps its target until the end of the turn that made it
  collectGarbage();
  const stillAlive = gone.filter((ref) => ref.deref() !== undefined).length;
  // Each of the 2 queues holds at most its live waiters + 32 done ones.
  assert.ok(stillAlive <= liveTarget + 2 * 32, `${stillAlive} of ${gone.length} done waiters are still referenced`);
  for (const w of waiting) queue.remove(w);
  queue.peek();
  assert.equal(queue.size, 0);
  assert.ok(queue.held <= 2 * 32, `an empty queue still holds ${queue.held} waiters`);
});

test('shedding takes the newest background waiter, and skips the done ones', () => {
  const queue = new WaitQueue<Entry>();
  const [a, b, c] = [waiter('a'), waiter('b'), waiter('c')];
  for (const w of [a, b, c, waiter('u', 'user')]) queue.push(w);
  queue.remove(c);
  assert.equal(queue.shedNewestBackground()?.name, 'b');
  assert.equal(queue.shedNewestBackground()?.name, 'a');
  assert.equal(queue.shedNewestBackground(), undefined);
  assert.equal(queue.userPresentCount, 1);
  assert.equal(queue.backgroundCount, 0);
});

test('most waiters of a long queue giving up in its middle: the queue compacts, keeps the order of the rest, and holds a bounded number', () => {
  const queue = new WaitQueue<Entry>();
  const all = Array.from({ length: 1000 }, (_, i) => waiter(`t${i}`));
  for (const w of all) queue.push(w);
  // Three in four give up (deadline or cancel), oldest first.
  for (const [i, w] of all.entries()) {
    if (i % 4 === 0) continue;
    queue.remove(w);
    assert.ok(queue.held <= 2 * queue.size + 32 + 1, `held ${queue.held} with ${queue.size} live`);
  }
  assert.equal(queue.size, 250);
  assert.ok(queue.held <= 2 * 250 + 32, `held ${queue.held} with 250 live`);
  const order: string[] = [];
  for (let next = serveNext(queue); next; next = serveNext(queue)) order.push(next.name);
  assert.deepEqual(
    order,
    all.filter((_, i) => i % 4 === 0).map((w) => w.name),
  );
  // Shedding keeps the bound too.
  for (const w of Array.from({ length: 100 }, (_, i) => waiter(`s${i}`))) queue.push(w);
  for (let i = 0; i < 90; i++) queue.shedNewestBackground();
  assert.equal(queue.size, 10);
  assert.ok(queue.held <= 2 * 10 + 32, `held ${queue.held} with 10 live after shedding`);
});
