import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { HeadroomError, silentLogger } from '@headroom/common';
import { ParallelismGate } from '../src/gate';
import { WorkerShutdown } from '../src/shutdown';

const flush = () => new Promise((resolve) => setImmediate(resolve));

/** A WorkerShutdown whose server, heartbeat and ledger are fakes that log what was done to them. */
function setUp(t: TestContext, options: { drainTimeoutMs?: number } = {}) {
  t.mock.timers.enable({ apis: ['setTimeout'] });
  const done: string[] = [];
  const gate = new ParallelismGate(2, 1);
  const shutdown = new WorkerShutdown({
    gate,
    tasks: { abortAll: (reason: HeadroomError) => void done.push(`abort ${reason.code}`) },
    server: {
      tryShutdown: (callback) => {
        done.push('tryShutdown');
        callback();
      },
      forceShutdown: () => void done.push('forceShutdown'),
    },
    setHealth: (status) => void done.push(status),
    stopProfiling: () => void done.push('stopProfiling'),
    beat: async () => void done.push(`beat draining=${shutdown.draining}`),
    leave: async () => void done.push('leave'),
    drainTimeoutMs: options.drainTimeoutMs ?? 1000,
    logger: silentLogger,
  });
  return { shutdown, gate, done };
}

test('close leaves the free set and stops at once when nothing runs; it is idempotent', async (t) => {
  const { shutdown, done } = setUp(t);
  const closing = shutdown.close();
  assert.equal(shutdown.close(), closing, 'the same promise');
  assert.equal(shutdown.draining, true);
  await closing;
  await shutdown.stopped;
  assert.deepEqual(done, ['stopProfiling', 'NOT_SERVING', 'beat draining=true', 'leave', 'tryShutdown']);
});

test('close sends a task waiting in the local queue back to its balancer', async (t) => {
  const { shutdown, gate } = setUp(t);
  gate.tryEnter();
  gate.tryEnter();
  const queued = gate.wait()!;
  const closing = shutdown.close();
  assert.equal(await queued.admitted, false);
  gate.leave();
  gate.leave();
  shutdown.slotFreed();
  await closing;
});

test('close waits for running tasks: the last one to leave its slot lets the worker stop', async (t) => {
  const { shutdown, gate, done } = setUp(t);
  gate.tryEnter();
  gate.tryEnter();
  const closing = shutdown.close();
  await flush();
  gate.leave();
  shutdown.slotFreed();
  await flush();
  assert.equal(done.includes('leave'), false, 'one task still runs');
  gate.leave();
  shutdown.slotFreed();
  await closing;
  assert.deepEqual(done.slice(-2), ['leave', 'tryShutdown']);
});

test('a drain that outlasts drainTimeoutMs aborts what still runs and forces the server down', async (t) => {
  const { shutdown, gate, done } = setUp(t, { drainTimeoutMs: 1000 });
  gate.tryEnter();
  const closing = shutdown.close();
  await flush();
  t.mock.timers.tick(999);
  await flush();
  assert.equal(done.includes('leave'), false);
  t.mock.timers.tick(1);
  await closing;
  assert.deepEqual(done.slice(-3), ['leave', 'abort HR_ERR_WORKER_STOPPED', 'forceShutdown']);
});

test('destroy aborts running tasks and stops the server at once, then leaves the ledger; it is idempotent', async (t) => {
  const { shutdown, gate, done } = setUp(t);
  gate.tryEnter();
  const destroying = shutdown.destroy();
  assert.equal(shutdown.destroy(), destroying);
  await destroying;
  await shutdown.stopped;
  assert.equal(shutdown.draining, true);
  assert.deepEqual(done, ['stopProfiling', 'abort HR_ERR_WORKER_STOPPED', 'forceShutdown', 'leave']);
});
