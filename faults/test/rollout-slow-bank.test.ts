/**
 * The rollout autopilot against a slow bank, on the bank workload: the bank simulator makes
 * bank-b 3x slower for the candidate cluster's calls alone (an incident that names a cluster),
 * the baseline keeps its speed. The autopilot must roll bank-b back alone within two gate
 * windows, and bank-a must ramp on to the plan's last step.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { describeRollout, relaxedWorkerGates, rolloutControlPlaneOptions, startRolloutStack, waitForRollout } from '../src/index';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/**
 * bank-b fails about 5% of its tasks on either cluster (1% of its calls, five calls a task): in
 * windows of 30 to 100 tasks the candidate's error rate minus the baseline's swings by 0.05 and
 * more on chance alone, so the line sits above that noise (errors are not what this test is about).
 */
const bankErrorRateNoise = 0.15;

test(
  'a slow bank for the candidate only: the autopilot rolls that integration back alone within two gate windows, the other ramps on',
  { timeout: 150_000 },
  async (t) => {
    const startedAtMs = performance.now();
    const { stack, bank, stopLoad } = await startRolloutStack(t, unleash, {
      // Banks twice as fast as their profiles: more tasks a window, a shorter test.
      bankTimeScale: 0.5,
      // Worker processes: each cluster's figures are its own, not those of this busy process.
      workers: [
        { cluster: 'baseline', count: 2, maxParallelism: 8, asProcess: {} },
        { cluster: 'candidate', count: 2, maxParallelism: 8, asProcess: {} },
      ],
      // Two pages of transactions a task: the workload's shape at half its CPU (this machine's 2 cores are shared).
      load: { integrations: ['bank-a', 'bank-b'], lanes: 8, payload: { maxPages: 2 } },
    });
    const plan = {
      name: 'slow-bank-b',
      integrations: ['bank-a', 'bank-b'],
      windowSeconds: 10,
      holdSeconds: 10,
      minSamples: 30,
      gates: { p50Ratio: 1.5, p95Ratio: 4, errorRateIncrease: bankErrorRateNoise, ...relaxedWorkerGates },
      steps: [
        { candidatePercent: 30, maxParallelism: 8 },
        { candidatePercent: 60, maxParallelism: 8 },
      ],
    };
    await bank.startIncident({ bank: 'bank-b', kind: 'slow', factor: 3, cluster: 'candidate' });
    const incidentAtMs = performance.now();
    const started = await stack.client.startRollout(plan);

    const rolledBack = await waitForRollout(stack.client, started.id, 'bank-b to be rolled back', 60_000, (rollout) => rollout.rolledBack.includes('bank-b'));
    const detectedMs = performance.now() - incidentAtMs;
    const rollback = rolledBack.decisions.find((d) => d.kind === 'rollback')!;
    assert.equal(rollback.integration, 'bank-b', describeRollout(rolledBack));
    assert.match(rollback.message, /rolled bank-b back to the baseline: p50Ratio \d+(\.\d+)? > 1\.5/);
    // Two windows, and the time a window's latencies take to settle before it is judged.
    const boundMs = 2 * plan.windowSeconds * 1000 + rolloutControlPlaneOptions.latencySettleMs;
    assert.ok(detectedMs < boundMs, `rolled back ${Math.round(detectedMs)} ms after the incident began (two windows and the settle time: ${boundMs} ms)`);
    const traffic = await stack.client.traffic();
    assert.equal(traffic.effectivePercent.integrations['bank-b'], 0, 'bank-b is back on the baseline');
    assert.deepEqual(traffic.override?.integrations, ['bank-b']);
    assert.equal(traffic.lastRollback?.actor, 'autopilot');
    assert.match(traffic.lastRollback?.reason ?? '', /rollout slow-bank-b/);

    const finished = await waitForRollout(stack.client, started.id, 'the rollout to finish', 80_000, (rollout) => rollout.status !== 'running');
    const load = await stopLoad();
    assert.equal(finished.status, 'completed', describeRollout(finished));
    assert.deepEqual(finished.rolledBack, ['bank-b']);
    t.diagnostic(`decisions: ${finished.decisions.map((d) => `${d.kind}: ${d.message}`).join(' | ')}`);
    // Holds (a gate near its line) may come between; the rest in this order.
    assert.deepEqual(
      finished.decisions.filter((d) => d.kind !== 'hold').map((d) => [d.kind, d.step, d.integration ?? '']),
      [
        ['start', 0, ''],
        ['rollback', 0, 'bank-b'],
        ['step', 1, ''],
        ['complete', 1, ''],
      ],
    );
    assert.equal((await stack.client.traffic()).effectivePercent.integrations['bank-a'], 60, 'bank-a ramped on');
    const bankA = finished.lastReading!.integrations.find((i) => i.integration === 'bank-a')!;
    assert.equal(bankA.status, 'ok', JSON.stringify(bankA));
    const rollbacks = await stack.client.audit({ action: 'rollback', actor: 'autopilot' });
    assert.deepEqual(
      rollbacks.map((e) => e.target),
      ['bank-b'],
    );
    const rollbackPropagationMs = traffic.lastRollback?.propagationMs;
    t.diagnostic(
      `rolled back ${Math.round(detectedMs)} ms after the incident (${rollback.message}); propagation ${rollbackPropagationMs} ms; load ${JSON.stringify(load)}; test ${Math.round((performance.now() - startedAtMs) / 1000)} s`,
    );
    assert.ok(load.ok > 500, `the load ran: ${JSON.stringify(load)}`);
  },
);
