/**
 * The rollout autopilot across control plane replicas: two control plane processes (the CLI) on
 * the same Redis prefix, Unleash flags and PostgreSQL schema, worker and balancer processes, and
 * load. Mid-rollout the one whose autopilot acts (GET /api/v1/rollouts says actingHere) is killed
 * with SIGKILL; the other must take the lease once it expires (--autopilot-lease-ms) and complete
 * the rollout, with every step applied once and every decision in the audit log once.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { startTestUnleash, testSchema, type TestUnleash } from '@headroom/unleash-local';
import type { Rollout } from '@headroom/control-plane';
import { eventually } from '@headroom/testkit';
import {
  TaskLog,
  demoTask,
  describeRollout,
  relaxedWorkerGates,
  sleep,
  startClosedLoad,
  startControlPlaneProcess,
  startStack,
  uniqueFlags,
  waitForRollout,
  type ControlPlaneProcess,
} from '../src/index';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const leaseMs = 3000;
const tickMs = 500;
/** Workers add their latencies to Redis every 500 ms here: the control planes read them 1.5 s after a slot ends. */
const controlPlaneArgs = ['--autopilot-tick-ms', String(tickMs), '--autopilot-lease-ms', String(leaseMs), '--latency-settle-ms', '1500'];
const workerArgs = ['--latency-report-interval-ms', '500', '--report-interval-ms', '500'];

test(
  'the acting control plane is killed mid-rollout: the other replica takes the lease and completes it; each step applied once, each decision audited once',
  { timeout: 170_000 },
  async (t) => {
    const startedAtMs = performance.now();
    const flags = uniqueFlags(unleash);
    const stack = await startStack(t, {
      workers: [
        ...['b0', 'b1'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism: 4, args: workerArgs })),
        ...['c0', 'c1'].map((workerId) => ({ workerId, cluster: 'candidate', maxParallelism: 4, args: workerArgs })),
      ],
      balancerCount: 1,
      flags,
    });
    const database = testSchema('hr_failover');
    const integrations = ['bank-a', 'bank-b'];
    const replicas: ControlPlaneProcess[] = [];
    for (let i = 0; i < 2; i++)
      replicas.push(await startControlPlaneProcess(t, stack.redisUrl, unleash.adminToken, flags, integrations, { database, args: controlPlaneArgs }));
    // Registered after the replicas: it runs once they were killed.
    t.after(() => database.drop());

    const log = new TaskLog();
    const balancer = stack.balancers[0]!;
    const load = startClosedLoad(t, log, {
      lanes: 8,
      balancerFor: () => balancer,
      taskFor: (lane) => demoTask({ integration: integrations[lane % 2]!, sleepMs: 30 }),
      maxTasks: 60_000,
      maxDurationMs: 150_000,
    });

    const plan = {
      name: 'failover',
      integrations,
      windowSeconds: 10,
      holdSeconds: 10,
      minSamples: 20,
      gates: { p50Ratio: 1.5, p95Ratio: 3, errorRateIncrease: 0.05, ...relaxedWorkerGates },
      steps: [
        { candidatePercent: 20, maxParallelism: 2 },
        { candidatePercent: 50, maxParallelism: 4 },
        { candidatePercent: 100, maxParallelism: 4 },
      ],
    };
    const started = await replicas[0]!.api.startRollout(plan);

    // Who acts, watched every 250 ms until the rollout ends: never both at once.
    const bothActing: number[] = [];
    const actingNow = async () =>
      Promise.all(
        replicas.map(async (replica) => replica.process.child.running && (await replica.api.rollouts().catch(() => ({ actingHere: false }))).actingHere),
      );
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const acting = await actingNow();
        if (acting.every(Boolean)) bothActing.push(performance.now());
        await sleep(250);
      }
    })();
    t.after(async () => {
      watching = false;
      await watcher;
    });

    // Mid-rollout: step 2 taken (its traffic moved), its hold under way.
    const inStep2 = await waitForRollout(
      replicas[0]!.api,
      started.id,
      'step 2 to be taken',
      70_000,
      (rollout) => rollout.step >= 1 || rollout.status !== 'running',
    );
    assert.equal(inStep2.status, 'running', describeRollout(inStep2));
    await sleep(2000);
    const acting = await actingNow();
    assert.equal(acting.filter(Boolean).length, 1, `one replica acts: ${JSON.stringify(acting)}`);
    const actingIndex = acting.indexOf(true);
    const [killed, survivor] = [replicas[actingIndex]!, replicas[1 - actingIndex]!];
    const stepWhenKilled = (await survivor.api.rollout(started.id)).step;
    await killed.process.kill('SIGKILL');
    const killedAtMs = performance.now();
    assert.equal(killed.process.child.running, false);

    await eventually('the survivor to take the lease', leaseMs + 10 * tickMs + 5000, async () =>
      (await survivor.api.rollouts()).actingHere ? true : undefined,
    );
    const takeoverMs = performance.now() - killedAtMs;
    const finished = await waitForRollout(survivor.api, started.id, 'the rollout to complete', 80_000, (rollout: Rollout) => rollout.status !== 'running');
    watching = false;
    await watcher;
    await load.stop();

    assert.equal(finished.status, 'completed', describeRollout(finished));
    assert.deepEqual(
      finished.decisions.filter((d) => d.kind !== 'hold').map((d) => [d.kind, d.step]),
      [
        ['start', 0],
        ['step', 1],
        ['step', 2],
        ['complete', 2],
      ],
      describeRollout(finished),
    );
    assert.deepEqual(bothActing, [], 'never two autopilots acting at once');
    assert.ok(
      takeoverMs >= leaseMs - 1000 && takeoverMs < leaseMs + 10 * tickMs + 3000,
      `the survivor acted ${Math.round(takeoverMs)} ms after the kill (lease ${leaseMs} ms)`,
    );

    // The record, in the shared schema: every decision once, every step's change once.
    const decisions = (await survivor.api.audit({ action: 'rollout.decision', limit: 100 })).reverse();
    const decisionKinds = decisions
      .filter((e) => (e.after as { kind: string }).kind !== 'hold')
      .map((e) => [(e.after as { kind: string }).kind, (e.after as { step: number }).step]);
    assert.deepEqual(
      decisionKinds,
      [
        ['step', 1],
        ['step', 2],
        ['complete', 2],
      ],
      'each decision in the audit log once',
    );
    const trafficChanges = (await survivor.api.audit({ action: 'traffic.set', actor: 'autopilot' })).reverse();
    assert.deepEqual(
      trafficChanges.map((e) => (e.after as { integrations: Record<string, { percent: number }> }).integrations['bank-a']?.percent),
      [20, 50, 100],
      'each step moved traffic once',
    );
    const traffic = await survivor.api.traffic();
    assert.deepEqual([traffic.effectivePercent.integrations['bank-a'], traffic.effectivePercent.integrations['bank-b']], [100, 100]);
    assert.equal((await survivor.api.parallelism()).candidate, 4);
    const answered = log.submissions.filter((s) => s.answer?.ok).length;
    t.diagnostic(
      `killed the acting replica in step ${stepWhenKilled + 1}; the survivor acted ${Math.round(takeoverMs)} ms later (lease ${leaseMs} ms, tick ${tickMs} ms); audit: ${decisionKinds.map(([kind, step]) => `${kind} ${step}`).join(', ')}; tasks ${log.submissions.length} sent, ${answered} answered ok; test ${Math.round((performance.now() - startedAtMs) / 1000)} s`,
    );
  },
);
