/**
 * Faults of the shared state, each under load: Redis restarted, Redis flushed (FLUSHALL), and
 * Unleash stopped. Real processes: Redis (private), Unleash (on the test PostgreSQL, one server
 * for the file: it takes seconds to start), the control plane CLI, balancer and worker CLIs
 * reading their flags from Unleash (in a process of its own: see src/unleash/child.ts). THE
 * INVARIANT (src/invariant.ts) is checked after each.
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { OverrideStore, overrideCovers } from '@headroom/fleet';
import { ControlPlaneApiError } from '@headroom/testkit';
import {
  FleetWatch,
  TaskLog,
  degradedMs,
  demoTask,
  finishCase,
  keyPrefix,
  msUntil,
  readWorker,
  scrapeMetrics,
  sleep,
  startClosedLoad,
  startControlPlaneProcess,
  startStack,
  startUnleashProcess,
  uniqueFlags,
  type ControlPlaneProcess,
  type FaultStack,
  type Submission,
  type UnleashProcess,
} from '../src/index';

/** An answer slower than this counts as degraded service (tasks here run 30 to 90 ms). */
const healthyLatencyMs = 1500;
const candidateMaxParallelism = 3;
const onRedisCluster = process.env.HEADROOM_TEST_REDIS === 'cluster';

let unleash: UnleashProcess;
before(async () => {
  unleash = await startUnleashProcess();
});
after(() => unleash?.close());

interface ControlledFleet {
  stack: FaultStack;
  control: ControlPlaneProcess;
  log: TaskLog;
}

function clusterOf(s: Submission): string | undefined {
  return s.answer?.ok ? s.answer.response.placement?.cluster : undefined;
}

/**
 * Two baseline workers, two candidate workers (their own max parallelism 1, the flag's 3), two
 * balancers and the control plane; the split set through the API and seen by every process.
 */
async function startControlledFleet(t: TestContext, percentToCandidate: { 'bank-a': number; 'bank-b': number }): Promise<ControlledFleet> {
  const flags = uniqueFlags(unleash);
  const stack = await startStack(t, {
    workers: [
      { workerId: 'w0', cluster: 'baseline', maxParallelism: 3 },
      { workerId: 'w1', cluster: 'baseline', maxParallelism: 3 },
      { workerId: 'c0', cluster: 'candidate', maxParallelism: 1 },
      { workerId: 'c1', cluster: 'candidate', maxParallelism: 1 },
    ],
    balancerCount: 2,
    flags,
  });
  const control = await startControlPlaneProcess(t, stack.redis.url, unleash.adminToken, flags, ['bank-a', 'bank-b']);
  await control.api.setTraffic({ integrations: percentToCandidate });
  await control.api.setParallelism({ candidate: candidateMaxParallelism });
  const log = new TaskLog();
  await waitForSplit(stack, log, percentToCandidate, 15_000);
  await msUntil("candidate workers at the flag's max parallelism", 15_000, async () =>
    (await Promise.all(stack.liveWorkers('candidate').map((w) => readWorker(w)))).every((w) => w.maxParallelism === candidateMaxParallelism),
  );
  return { stack, control, log };
}

/** Probes every balancer until each integration lands where the split says (100: candidate, 0: baseline). */
async function waitForSplit(stack: FaultStack, log: TaskLog, percentToCandidate: Record<string, number>, timeoutMs: number): Promise<number> {
  return msUntil(`the split ${JSON.stringify(percentToCandidate)} on every balancer`, timeoutMs, async () => {
    for (const balancer of stack.liveBalancers()) {
      for (const [integration, percent] of Object.entries(percentToCandidate)) {
        const probe = await log.submit(balancer, demoTask({ integration, sleepMs: 1, priority: 'USER_PRESENT' }));
        if (clusterOf(probe) !== (percent === 100 ? 'candidate' : 'baseline')) return false;
      }
    }
    return true;
  });
}

function mixedLoad(t: TestContext, stack: FaultStack, log: TaskLog) {
  return startClosedLoad(t, log, {
    lanes: 10,
    balancerFor: (lane) => stack.balancers[lane % 2]!,
    taskFor: (lane, seq) =>
      demoTask({ integration: seq % 2 === 0 ? 'bank-a' : 'bank-b', priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND', sleepMs: 30 + (seq % 4) * 20 }),
  });
}

async function flagsReachable(stack: FaultStack): Promise<number[]> {
  const processes = [...stack.liveBalancers(), ...stack.liveWorkers()];
  return Promise.all(processes.map(async (p) => (await scrapeMetrics(p.metricsPort)).value('headroom_flags_unleash_reachable')));
}

for (const fault of ['restart', 'flushall'] as const) {
  const name = fault === 'restart' ? 'Redis restart' : 'Redis FLUSHALL';
  test(`${name} mid-load: everything reconnects, the ledger and the rollback override are rebuilt`, async (t) => {
    const startedAtMs = performance.now();
    const { stack, control, log } = await startControlledFleet(t, { 'bank-a': 100, 'bank-b': 100 });
    // A rollback of bank-a: an override in Redis (and the flag's strategy off in Unleash).
    await control.api.rollback({ integration: 'bank-a' });
    const rolledBackAtMs = performance.now();
    const overrides = new OverrideStore(stack.ledgerRedis, keyPrefix);
    const before = await overrides.read();
    assert.ok(before && overrideCovers(before, 'bank-a'));

    const watch = new FleetWatch(stack).start();
    const load = mixedLoad(t, stack, log);
    await sleep(800);
    const faultAtMs = performance.now();
    if (fault === 'restart') {
      // No persistence: the restarted Redis is empty, as after losing its data.
      await stack.restartRedis(300);
    } else {
      await stack.flushRedis();
    }
    const ledgerRebuiltMs = await msUntil(
      'every worker back in the ledger',
      15_000,
      async () => (await Promise.all(stack.clusters.map((c) => stack.ledger.snapshot(c)))).every((s) => s.workers.length === 2),
      faultAtMs,
    );
    let rebuiltVersion = 0;
    const overrideRebuiltMs = await msUntil(
      'the override rebuilt from Unleash',
      15_000,
      async () => {
        const state = await overrides.read();
        rebuiltVersion = state?.version ?? 0;
        return state !== undefined && overrideCovers(state, 'bank-a') && state.version > before.version;
      },
      faultAtMs,
    );
    const balancersAppliedMs = await msUntil(
      'every balancer to apply the rebuilt override',
      10_000,
      async () =>
        (await Promise.all(stack.liveBalancers().map(async (b) => (await scrapeMetrics(b.metricsPort)).value('headroom_balancer_override_version')))).every(
          (v) => v >= rebuiltVersion,
        ),
      faultAtMs,
    );
    await sleep(1000);
    await load.stop();

    const result = await finishCase(t, stack, log, watch, {
      name,
      startedAtMs,
      measuredMs: {
        degraded: degradedMs(log, faultAtMs, healthyLatencyMs),
        ledgerRebuilt: ledgerRebuiltMs,
        overrideRebuilt: overrideRebuiltMs,
        balancersApplied: balancersAppliedMs,
      },
    });
    const sentAfterRollback = log.submissions.filter((s) => s.submittedAtMs > rolledBackAtMs);
    const onCandidate = sentAfterRollback.filter((s) => s.task.integration === 'bank-a' && clusterOf(s) === 'candidate');
    assert.deepEqual(
      onCandidate.map((s) => s.task.id),
      [],
      'the rollback held: no bank-a task on the candidate, Redis data lost or not',
    );
    assert.ok(
      sentAfterRollback.some((s) => s.task.integration === 'bank-b' && clusterOf(s) === 'candidate'),
      'bank-b still went to the candidate',
    );
    assert.ok(log.answeredBetween(faultAtMs + ledgerRebuiltMs).filter((s) => s.answer?.ok).length > 10, `service came back: ${JSON.stringify(result.tally)}`);
  });
}

// Unleash's outage is between Unleash and the processes that read it: the same on any Redis, so
// faults-on-cluster does not run it again.
if (!onRedisCluster)
  test('Unleash stopped mid-load: routing and parallelism keep the last flags, a change gets 502, and all converge when it is back', async (t) => {
    const startedAtMs = performance.now();
    const { stack, control, log } = await startControlledFleet(t, { 'bank-a': 100, 'bank-b': 0 });
    const watch = new FleetWatch(stack).start();
    const load = mixedLoad(t, stack, log);
    await sleep(800);

    const pausedAtMs = performance.now();
    await unleash.stop();
    const noticedMs = await msUntil('every balancer and worker to notice', 10_000, async () => (await flagsReachable(stack)).every((v) => v === 0), pausedAtMs);
    // Several failed polls (every 200 ms) later, the last flags still hold.
    await sleep(1000);
    const candidateMaxDuringOutage = (await Promise.all(stack.liveWorkers('candidate').map((w) => readWorker(w)))).map((w) => w.maxParallelism);
    const refusal = (call: Promise<unknown>) =>
      call.then(
        () => 'accepted',
        (error: unknown) => error,
      );
    const trafficChange = await refusal(control.api.setTraffic({ integrations: { 'bank-a': 0 } }));
    const parallelismChange = await refusal(control.api.setParallelism({ candidate: 2 }));

    const restartedAtMs = performance.now();
    await unleash.start();
    const resumedAtMs = performance.now();
    const reconnectedMs = await msUntil(
      'every balancer and worker to reach Unleash again',
      30_000,
      async () => (await flagsReachable(stack)).every((v) => v === 1),
      resumedAtMs,
    );
    // The same changes now succeed and reach every process.
    await control.api.setTraffic({ integrations: { 'bank-a': 0 } });
    await control.api.setParallelism({ candidate: 2 });
    const changedAtMs = performance.now();
    const splitConvergedMs = await waitForSplit(stack, log, { 'bank-a': 0, 'bank-b': 0 }, 15_000);
    const parallelismConvergedMs = await msUntil(
      'candidate workers at the new max parallelism',
      15_000,
      async () => (await Promise.all(stack.liveWorkers('candidate').map((w) => readWorker(w)))).every((w) => w.maxParallelism === 2),
      changedAtMs,
    );
    await sleep(500);
    await load.stop();

    await finishCase(t, stack, log, watch, {
      name: 'Unleash stopped',
      startedAtMs,
      measuredMs: {
        degraded: degradedMs(log, pausedAtMs, healthyLatencyMs),
        outage: Math.round(resumedAtMs - pausedAtMs),
        unleashRestart: Math.round(resumedAtMs - restartedAtMs),
        clientsNoticed: noticedMs,
        clientsReconnected: reconnectedMs,
        splitConvergedAfterChange: splitConvergedMs,
        parallelismConvergedAfterChange: parallelismConvergedMs,
      },
    });
    for (const change of [trafficChange, parallelismChange]) {
      assert.ok(change instanceof ControlPlaneApiError, String(change));
      assert.equal(change.status, 502, change.message);
      assert.equal(change.code, 'HR_ERR_UNLEASH_FAILED', change.message);
    }
    assert.deepEqual(candidateMaxDuringOutage, [candidateMaxParallelism, candidateMaxParallelism], "the workers kept the flag's max parallelism");
    const duringOutage = log.answeredBetween(pausedAtMs, resumedAtMs).filter((s) => s.answer?.ok);
    assert.ok(duringOutage.length > 10, `served during the outage: ${duringOutage.length}`);
    const misrouted = duringOutage.filter((s) => clusterOf(s) !== (s.task.integration === 'bank-a' ? 'candidate' : 'baseline'));
    assert.deepEqual(
      misrouted.map((s) => `${s.task.integration} on ${clusterOf(s)}`),
      [],
      'routing kept the last flags',
    );
    assert.ok(
      log.submissions.every((s) => s.answer?.ok && !s.answer.response.error),
      'every task succeeded throughout',
    );
  });
