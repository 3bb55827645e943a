/**
 * The rollout autopilot against a leaky candidate: the candidate's worker process runs the bank
 * handlers with HEADROOM_BANK_LEAK=1 (every task leaks what it fetched, as a build with the bug
 * would) on a small heap (--max-old-space-size-mb 96). The heap gate must stop the ramp and roll
 * every integration back before the worker runs out of memory; the worker must still be alive.
 *
 * The line is 0.75, not the default 0.85: 72 of the 96 MiB, leaving the autopilot a few reports'
 * time to roll back before the leak fills the rest. (The share is old-generation used ÷ its
 * limit: it reaches about 1 at the out-of-memory crash; see common/test/runtime-sampler.test.ts.)
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { bankLeakEnv } from '@headroom/sim/handlers/bank';
import { describeRollout, relaxedWorkerGates, startRolloutStack, waitForRollout } from '../src/index';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const heapLine = 0.75;

test('a leaky candidate: the heap gate rolls every integration back before the worker runs out of memory', { timeout: 150_000 }, async (t) => {
  const startedAtMs = performance.now();
  const { stack, workerProcesses, stopLoad } = await startRolloutStack(t, unleash, {
    bankTimeScale: 0.5,
    workers: [
      { cluster: 'baseline', count: 2, maxParallelism: 8, asProcess: {} },
      { cluster: 'candidate', count: 1, maxParallelism: 8, asProcess: { args: ['--max-old-space-size-mb', '96'], env: { [bankLeakEnv]: '1' } } },
    ],
    load: { integrations: ['bank-a', 'bank-b'], lanes: 8 },
  });
  const candidate = workerProcesses.find((w) => w.cluster === 'candidate')!.process;
  const plan = {
    name: 'leaky-candidate',
    integrations: ['bank-a', 'bank-b'],
    windowSeconds: 10,
    holdSeconds: 10,
    minSamples: 30,
    // The heap is what this test is about: the other lines are far enough not to decide first on a shared
    // machine (bank-b fails some 5% of its tasks on either cluster: the error-rate difference is noisy).
    gates: { p50Ratio: 2, p95Ratio: 4, errorRateIncrease: 0.15, ...relaxedWorkerGates, heapShare: heapLine },
    steps: [
      { candidatePercent: 30, maxParallelism: 8 },
      { candidatePercent: 60, maxParallelism: 8 },
      { candidatePercent: 100, maxParallelism: 8 },
    ],
  };
  const started = await stack.client.startRollout(plan);
  const rolloutAtMs = performance.now();

  const finished = await waitForRollout(stack.client, started.id, 'the heap gate to roll back', 100_000, (rollout) => rollout.status !== 'running');
  const rolledBackAfterMs = performance.now() - rolloutAtMs;
  assert.equal(finished.status, 'rolled-back', describeRollout(finished));
  assert.deepEqual([...finished.rolledBack].sort(), ['bank-a', 'bank-b']);
  const rollbacks = finished.decisions.filter((d) => d.kind === 'rollback' && d.integration !== undefined);
  assert.equal(rollbacks.length, 2, describeRollout(finished));
  for (const decision of rollbacks) {
    const figure = new RegExp(`the candidate's workers: heapShare (\\d+(?:\\.\\d+)?) > ${heapLine}$`).exec(decision.message);
    assert.ok(figure, `the decision names heapShare with its figure: ${decision.message}`);
    assert.ok(Number(figure[1]) > heapLine);
  }
  const heapShareAtRollback = finished.lastReading!.workers.gates.find((g) => g.gate === 'heapShare')!;
  assert.equal(heapShareAtRollback.status, 'breached');
  const traffic = await stack.client.traffic();
  assert.deepEqual([traffic.effectivePercent.integrations['bank-a'], traffic.effectivePercent.integrations['bank-b']], [0, 0], 'both back on the baseline');

  // The worker holds what it leaked, takes no new task, and lives on.
  await sleep(3000);
  const load = await stopLoad();
  assert.ok(
    candidate.child.running,
    `the candidate worker is alive (exit ${JSON.stringify(candidate.child.exitCode)}); its last lines: ${candidate.child.recentOutput().join('\n')}`,
  );
  assert.equal(candidate.child.exitCode, null);
  const report = (await stack.client.workers()).find((w) => w.workerId === 'candidate-0');
  assert.ok(report, 'the candidate worker is still in the ledger');
  t.diagnostic(
    `rolled back ${Math.round(rolledBackAfterMs)} ms after the start: ${rollbacks.map((d) => d.message).join(' | ')}; worker now ${JSON.stringify(report.stats ? { heapUsedMiB: Math.round(report.stats.heapUsedBytes / 2 ** 20), heapLimitMiB: Math.round(report.stats.heapLimitBytes / 2 ** 20) } : null)}; load ${JSON.stringify(load)}; test ${Math.round((performance.now() - startedAtMs) / 1000)} s`,
  );
});
