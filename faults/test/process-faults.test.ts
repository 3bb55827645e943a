/**
 * Faults of one process, each under load on a fleet of real worker and balancer processes on a
 * private Redis: kill -9 of a worker and of a balancer, a worker whose event loop is blocked for
 * seconds, and SIGTERM to a worker. THE INVARIANT (src/invariant.ts) is checked after each.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import {
  FleetWatch,
  assertConverged,
  TaskLog,
  degradedMs,
  demoTask,
  finishCase,
  heartbeatTimeoutMs,
  latencyMs,
  msUntil,
  percentile,
  readWorker,
  scrapeMetrics,
  sleep,
  startClosedLoad,
  startStack,
  type FaultStack,
  type Submission,
  type WorkerSpec,
} from '../src/index';

const onRedisCluster = process.env.HEADROOM_TEST_REDIS === 'cluster';
const maxParallelism = 3;
const victimMaxParallelism = 8;
const threeWorkers: WorkerSpec[] = ['w0', 'w1', 'w2'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism }));
/** An answer slower than this counts as degraded service (tasks here run 50 to 500 ms). */
const healthyLatencyMs = 1500;

async function ledgerInflight(stack: FaultStack, workerId: string): Promise<number | undefined> {
  return (await stack.ledger.snapshot('baseline')).workers.find((w) => w.workerId === workerId)?.inflight;
}

async function inLedger(stack: FaultStack, workerId: string): Promise<boolean> {
  return (await ledgerInflight(stack, workerId)) !== undefined;
}

function placedOn(s: Submission): string | undefined {
  return s.answer?.ok ? s.answer.response.placement?.workerId : undefined;
}

/** When the balancer reserved the task's slot, at the earliest (client clock). */
function reservedAtMs(s: Submission): number {
  return s.submittedAtMs + (s.answer?.ok ? Number(s.answer.response.placement?.queueWaitMs ?? 0) : 0);
}

async function sumOverBalancers(stack: FaultStack, name: string, labels: Record<string, string>): Promise<number> {
  const all = await Promise.all(stack.liveBalancers().map(async (b) => (await scrapeMetrics(b.metricsPort)).sum(name, labels)));
  return all.reduce((a, b) => a + b, 0);
}

test('kill -9 a worker mid-task: unstarted tasks go elsewhere, started ones get HR_ERR_WORKER_LOST or are retried when idempotent, it leaves the ledger', async (t) => {
  const startedAtMs = performance.now();
  // The victim has the most slots, so it still has free ones when it dies: balancers keep
  // picking it until it leaves the ledger, and those tasks must go elsewhere.
  const workers = threeWorkers.map((w) => (w.workerId === 'w0' ? { ...w, maxParallelism: victimMaxParallelism } : w));
  const stack = await startStack(t, { workers, balancerCount: 2 });
  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  // 10 lanes for 14 slots: workers fill up by turns. Every other task is idempotent.
  const load = startClosedLoad(t, log, {
    lanes: 10,
    balancerFor: (lane) => stack.balancers[lane % 2]!,
    taskFor: (lane, seq) => demoTask({ priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND', sleepMs: 100 + (seq % 5) * 50, idempotent: seq % 2 === 0 }),
  });
  // Kill it while it runs tasks (by its own count: they started there) and has slots to spare
  // in the ledger (which also counts tasks reserved for it and still on their way).
  await msUntil('w0 running tasks, with free slots', 10_000, async () => {
    const [own, reserved] = await Promise.all([readWorker(stack.worker('w0')), ledgerInflight(stack, 'w0')]);
    return own.inflight >= 1 && reserved !== undefined && reserved <= victimMaxParallelism - 3;
  });
  const killedAtMs = performance.now();
  await stack.stop(stack.worker('w0'), 'SIGKILL');
  const leftLedgerMs = await msUntil('w0 out of the ledger', 10_000, async () => !(await inLedger(stack, 'w0')), killedAtMs);
  const leftAtMs = killedAtMs + leftLedgerMs;
  await sleep(1000);
  await load.stop();

  const lostRetries = await sumOverBalancers(stack, 'headroom_balancer_dispatch_retries_total', { reason: 'lost' });
  const unreachableRetries = await sumOverBalancers(stack, 'headroom_balancer_dispatch_retries_total', { reason: 'unreachable' });
  const result = await finishCase(t, stack, log, watch, {
    name: 'kill -9 a worker mid-task',
    startedAtMs,
    measuredMs: { leftLedger: leftLedgerMs, degraded: degradedMs(log, killedAtMs, healthyLatencyMs) },
    figures: { idempotentRetriedAfterLoss: lostRetries, retriedBeforeStart: unreachableRetries },
  });

  const lost = log.submissions.filter((s) => !s.answer?.ok && s.answer?.code === 'HR_ERR_WORKER_LOST');
  assert.deepEqual(
    Object.keys(result.tally.refused).filter((code) => code !== 'HR_ERR_WORKER_LOST'),
    [],
    JSON.stringify(result.tally),
  );
  assert.deepEqual(result.tally.taskErrors, {});
  assert.ok(
    lost.every((s) => !s.task.idempotent),
    'an idempotent task lost with its worker is retried elsewhere',
  );
  assert.ok(lost.length <= victimMaxParallelism, `only tasks running on the dead worker fail: ${lost.length}`);
  assert.ok(lost.length + lostRetries >= 1, 'the kill hit tasks that had started');
  assert.ok(unreachableRetries >= 1, 'tasks sent to the dead worker before it left the ledger went elsewhere');
  // Within a few heartbeats: the balancers' timeout plus a sweep interval (1 s) and slack for a busy machine.
  assert.ok(leftLedgerMs <= heartbeatTimeoutMs + 3000, `left the ledger ${leftLedgerMs} ms after the kill`);
  const reservedAfterLeaving = log.submissions.filter((s) => placedOn(s) === 'w0' && reservedAtMs(s) > leftAtMs);
  assert.deepEqual(
    reservedAfterLeaving.map((s) => s.task.id),
    [],
    'no task went to w0 once it left the ledger',
  );
  assert.ok(log.answeredBetween(leftAtMs).filter((s) => s.answer?.ok).length > 10, 'the others kept serving');
});

test('kill -9 a balancer mid-load: its clients get connection errors, the other clients nothing, its reservations come back', async (t) => {
  const startedAtMs = performance.now();
  const stack = await startStack(t, { workers: threeWorkers, balancerCount: 2 });
  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  const [survivor, victim] = stack.balancers as [(typeof stack.balancers)[0], (typeof stack.balancers)[0]];
  // 16 lanes for 9 slots, 8 of them through the victim: every worker is full until the kill.
  const load = startClosedLoad(t, log, {
    lanes: 16,
    balancerFor: (lane) => (lane % 2 === 0 ? survivor : victim),
    taskFor: (lane, seq) => demoTask({ priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND', sleepMs: 40 + (seq % 5) * 20 }),
  });
  await sleep(800);
  const killedAtMs = performance.now();
  await stack.stop(victim, 'SIGKILL');
  await sleep(1000);
  const loadStoppedAtMs = performance.now();
  await load.stop();
  // Its leases of tasks never dispatched are dropped by their workers' heartbeats (within three
  // heartbeat periods, 3 s): then the ledger agrees again.
  const reservationsBackMs = Math.round(loadStoppedAtMs - killedAtMs) + (await assertConverged(stack));

  const survivorsAfterKill = log.answeredBetween(killedAtMs).filter((s) => s.balancerId === survivor.id);
  const result = await finishCase(t, stack, log, watch, {
    name: 'kill -9 a balancer',
    startedAtMs,
    killedBalancerIds: [victim.id],
    measuredMs: {
      // The other clients' service: healthy throughout means 0.
      degradedForOtherClients: degradedMs(log, killedAtMs, healthyLatencyMs, (s) => s.balancerId !== survivor.id || s.answer?.ok === true),
      otherClientsP99AfterKill: Math.round(percentile(survivorsAfterKill.map(latencyMs), 99)),
      reservationsBack: reservationsBackMs,
    },
  });
  assert.deepEqual({ ...result.tally.refused, ...result.tally.taskErrors }, {}, 'no coded error: the survivors served everything');
  assert.ok(result.tally.connectionErrors >= 1, "the killed balancer's clients got connection errors");
  assert.ok(
    log.submissions.filter((s) => s.balancerId === survivor.id).every((s) => s.answer?.ok),
    'the other clients got only results',
  );
  assert.ok(survivorsAfterKill.length > 20, `the other clients kept being served: ${survivorsAfterKill.length}`);
});

test('a worker blocks its event loop for 4 s: its heartbeats lapse, it gets no tasks, the others serve, it rejoins with its in-flight count right', async (t) => {
  const startedAtMs = performance.now();
  const stack = await startStack(t, { workers: threeWorkers, balancerCount: 2 });
  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  const load = startClosedLoad(t, log, {
    lanes: 8,
    balancerFor: (lane) => stack.balancers[lane % 2]!,
    taskFor: (lane, seq) => demoTask({ priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND', sleepMs: 50 + (seq % 3) * 50, deadlineMs: 15_000 }),
  });
  await sleep(600);
  // CPU-bound for 4 s, then 7 s of waiting: still running when its worker comes back, and
  // after the load has stopped, when its count is compared.
  const blockedAtMs = performance.now();
  const blocker = log.submit(stack.balancers[0]!, demoTask({ cpuMs: 4000, sleepMs: 7000, deadlineMs: 25_000 }));
  let victim: string | undefined;
  const leftLedgerMs = await msUntil(
    'a worker to leave the ledger',
    10_000,
    async () => {
      const present = new Set((await stack.ledger.snapshot('baseline')).workers.map((w) => w.workerId));
      victim = threeWorkers.map((w) => w.workerId).find((id) => !present.has(id));
      return victim !== undefined;
    },
    blockedAtMs,
  );
  const leftAtMs = blockedAtMs + leftLedgerMs;
  let lastSeenAbsentAtMs = leftAtMs;
  let inflightAtRejoin = 0;
  const rejoinedMs = await msUntil(
    `${victim} back in the ledger`,
    15_000,
    async () => {
      const inflight = await ledgerInflight(stack, victim!);
      if (inflight === undefined) lastSeenAbsentAtMs = performance.now();
      else inflightAtRejoin = inflight;
      return inflight !== undefined;
    },
    blockedAtMs,
  );
  const rejoinedAtMs = blockedAtMs + rejoinedMs;
  await sleep(1500);
  await load.stop();
  // Its in-flight count is right once back: with the load stopped (under load the ledger also
  // counts leases on their way to it and releases on their way back, so it is above what the
  // worker runs as often as not), the ledger holds what the worker itself counts: the blocker,
  // still running, whose lease was swept with the worker and declared again.
  let ownInflight = 0;
  await msUntil('the ledger to count what the worker runs', 3000, async () => {
    const [ledger, own] = await Promise.all([ledgerInflight(stack, victim!), readWorker(stack.worker(victim!))]);
    ownInflight = own.inflight;
    return ledger === own.inflight && own.inflight >= 1;
  });
  const blockerAnswer = await blocker;

  const othersDuringBlock = log.answeredBetween(leftAtMs, rejoinedAtMs).filter((s) => placedOn(s) !== victim);
  const result = await finishCase(t, stack, log, watch, {
    name: 'a worker blocks its event loop',
    startedAtMs,
    measuredMs: {
      heartbeatLapseToLeftLedger: leftLedgerMs,
      outOfLedger: Math.round(rejoinedAtMs - leftAtMs),
      blockToRejoin: rejoinedMs,
      othersP50DuringBlock: Math.round(percentile(othersDuringBlock.map(latencyMs), 50)),
    },
    figures: {
      victim: victim!,
      inflightWhenItRejoined: inflightAtRejoin,
      itsOwnInflightThen: ownInflight,
      missedScrapesWhileBlocked: watch.record(victim!).missedScrapes,
    },
  });
  assert.deepEqual({ ...result.tally.refused, ...result.tally.taskErrors }, {}, 'every task ran, late ones included');
  assert.ok(blockerAnswer.answer?.ok && placedOn(blockerAnswer) === victim, 'the blocking task itself finished on its worker');
  assert.ok(inflightAtRejoin >= 1, 'it rejoined declaring the task it still ran');
  assert.ok(watch.record(victim!).missedScrapes >= 1, 'its event loop was blocked (its metrics did not answer)');
  assert.ok(othersDuringBlock.length >= 5 && othersDuringBlock.every((s) => s.answer?.ok), `the others kept serving: ${othersDuringBlock.length}`);
  const sentWhileOut = log.submissions.filter((s) => placedOn(s) === victim && reservedAtMs(s) > leftAtMs && reservedAtMs(s) < lastSeenAbsentAtMs - 100);
  assert.deepEqual(
    sentWhileOut.map((s) => s.task.id),
    [],
    'no task was sent to it while it was out of the ledger',
  );
  assert.ok(
    log.submissions.some((s) => placedOn(s) === victim && s.submittedAtMs > rejoinedAtMs),
    'it gets tasks again',
  );
});

// A drain is the worker's own business (it stops taking tasks and finishes its own): the same on any
// Redis, so faults-on-cluster does not run it again.
if (!onRedisCluster)
  test('SIGTERM to a worker under load: it drains, every task it accepted finishes, nothing is lost', async (t) => {
    const startedAtMs = performance.now();
    const stack = await startStack(t, { workers: threeWorkers, balancerCount: 2 });
    const log = new TaskLog();
    const watch = new FleetWatch(stack).start();
    const load = startClosedLoad(t, log, {
      lanes: 10,
      balancerFor: (lane) => stack.balancers[lane % 2]!,
      taskFor: (lane, seq) => demoTask({ priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND', sleepMs: 200 + (seq % 4) * 100 }),
    });
    await sleep(500);
    // Signalled while it runs as many tasks as it may, by its own count.
    await msUntil('w0 full', 10_000, async () => (await readWorker(stack.worker('w0'))).inflight === maxParallelism);
    const signalledAtMs = performance.now();
    const stopping = stack.stop(stack.worker('w0'), 'SIGTERM');
    // Draining: it leaves the free set at once (no new task), and stays until its tasks are done.
    const stoppedTakingMs = await msUntil(
      'w0 to stop taking tasks',
      5000,
      async () => (await stack.ledger.snapshot('baseline')).workers.find((w) => w.workerId === 'w0')?.draining !== false,
      signalledAtMs,
    );
    const { exitCode, killedAfterTimeout } = await stopping;
    const drainedMs = Math.round(performance.now() - signalledAtMs);
    assert.equal(killedAfterTimeout, false, 'it exited on its own');
    assert.equal(exitCode, 0);
    assert.equal(await inLedger(stack, 'w0'), false, 'it left the ledger as it exited');
    await sleep(1000);
    await load.stop();

    const finishedWhileDraining = log.answeredBetween(signalledAtMs).filter((s) => placedOn(s) === 'w0');
    const result = await finishCase(t, stack, log, watch, {
      name: 'SIGTERM to a worker',
      startedAtMs,
      measuredMs: { stoppedTakingTasks: stoppedTakingMs, drainedAndExited: drainedMs, degraded: degradedMs(log, signalledAtMs, healthyLatencyMs) },
      figures: { finishedWhileDraining: finishedWhileDraining.length },
    });
    assert.equal(result.tally.ok, result.tally.submitted, `every task succeeded: ${JSON.stringify(result.tally)}`);
    assert.ok(finishedWhileDraining.length >= 1, 'the tasks it ran when signalled finished there');
  });
