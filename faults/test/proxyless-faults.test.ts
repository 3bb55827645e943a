/**
 * The proxyless counterpart of process-faults' balancer kill (the fault suite covers both
 * modes): a caller process running @headroom/client/proxyless (src/proxyless-caller) shares the
 * workers with a balancer's clients, and is killed with SIGKILL mid-load. THE INVARIANT
 * (src/invariant.ts) is checked after it.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import {
  FleetWatch,
  TaskLog,
  assertConverged,
  degradedMs,
  demoTask,
  finishCase,
  latencyMs,
  msUntil,
  percentile,
  sleep,
  startClosedLoad,
  startProxylessCaller,
  startStack,
  type WorkerSpec,
} from '../src/index';

const maxParallelism = 3;
const threeWorkers: WorkerSpec[] = ['w0', 'w1', 'w2'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism }));
/** An answer slower than this counts as degraded service (tasks here run 40 to 120 ms). */
const healthyLatencyMs = 1500;

/** The integrations the lanes take in turn. */
const laneIntegrations = ['bank-a', 'bank-b', 'bank-c', 'bank-d'];

test('kill -9 a proxyless client process mid-load: the other callers are unaffected, the slots it held come back, nothing is over-admitted', async (t) => {
  const startedAtMs = performance.now();
  const stack = await startStack(t, { workers: threeWorkers, balancerCount: 1 });
  const [balancer] = stack.balancers as [(typeof stack.balancers)[0]];
  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  // 16 lanes for 9 slots, 8 of them in the proxyless caller: every worker is full until the kill.
  const caller = await startProxylessCaller(t, stack, { clientId: 'px0', lanes: 8, sleepMs: [40, 60, 80, 100, 120] });
  const load = startClosedLoad(t, log, {
    lanes: 8,
    balancerFor: () => balancer,
    // Over four integrations: one may hold only half of the cluster's slots (the ledger's default limit).
    taskFor: (lane, seq) =>
      demoTask({
        integration: laneIntegrations[lane % laneIntegrations.length]!,
        priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND',
        sleepMs: 40 + (seq % 5) * 20,
      }),
  });
  // Killed once it is served (through the ledger and straight to the workers) and holds slots
  // while no slot is free.
  await caller.until('20 answers', 10_000, (answers) => answers.ok >= 20);
  await msUntil(
    'every slot busy, some held by the caller',
    10_000,
    async () => caller.latest().holdingSlots >= 1 && (await stack.ledger.snapshot('baseline')).totalFree === 0,
  );
  const atKill = caller.latest();
  const killedAtMs = performance.now();
  await caller.process.kill('SIGKILL');
  await sleep(1000);
  const loadStoppedAtMs = performance.now();
  await load.stop();
  // What it reserved and never released (tasks it ran, tasks on their way to a worker) is
  // dropped by the workers' heartbeats, its waiting mark expires: then the ledger agrees again.
  const reservationsBackMs = Math.round(loadStoppedAtMs - killedAtMs) + (await assertConverged(stack));

  const othersAfterKill = log.answeredBetween(killedAtMs);
  const result = await finishCase(t, stack, log, watch, {
    name: 'kill -9 a proxyless client',
    startedAtMs,
    measuredMs: {
      // The balancer's clients' service: healthy throughout means 0.
      degradedForOtherClients: degradedMs(log, killedAtMs, healthyLatencyMs),
      otherClientsP99BeforeKill: Math.round(
        percentile(log.submissions.filter((s) => s.answeredAtMs !== undefined && s.answeredAtMs < killedAtMs).map(latencyMs), 99),
      ),
      otherClientsP99AfterKill: Math.round(percentile(othersAfterKill.map(latencyMs), 99)),
      reservationsBack: reservationsBackMs,
    },
    figures: {
      proxylessAnsweredBeforeKill: atKill.ok,
      proxylessInFlightAtKill: atKill.inFlight,
      proxylessHoldingSlotsAtKill: atKill.holdingSlots,
      proxylessFailedBeforeKill: JSON.stringify(atKill.failedByCode),
    },
  });
  assert.deepEqual(atKill.failedByCode, {}, 'the proxyless caller got only results before the kill');
  assert.equal(caller.process.child.exitCode, null, 'it died of the signal, not by itself');
  assert.deepEqual({ ...result.tally.refused, ...result.tally.taskErrors }, {}, 'no coded error for the other callers');
  assert.equal(result.tally.connectionErrors, 0);
  assert.equal(result.tally.ok, result.tally.submitted, "the balancer's clients got only results");
  assert.ok(othersAfterKill.length > 20, `the other callers kept being served: ${othersAfterKill.length}`);
});
