/**
 * A slow upstream under load: workers run the bank integration against the simulated bank
 * (sim/src/bank, a process of its own), which is switched to a latency spike (every answer 10x
 * slower for 5 s). Arrivals keep their rate, so the balancer's queue fills: it must stay within
 * its bound (--max-queued-tasks) and say so with a code, and user-present tasks must still go
 * first. THE INVARIANT (src/invariant.ts) is checked at the end.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { json, task } from '@headroom/testkit';
import {
  FleetWatch,
  TaskLog,
  bankUrlEnv,
  degradedMs,
  finishCase,
  latencyMs,
  percentile,
  scrapeMetrics,
  sleep,
  startBankSimulator,
  startOpenLoad,
  startStack,
  type Submission,
} from '../src/index';

const maxQueuedTasks = 12;
/** Every bank answer 10x slower: a task (two calls in sequence) takes over a second instead of about 150 ms. */
const spike = { factor: 10, durationMs: 5000 };
/** About half the fleet's capacity before the spike, twice what it can do during it. */
const arrivalsPerSecond = 12;
/** Once the spike is over, an answer slower than this is still the backlog. */
const healthyLatencyMs = 1000;

const isUserPresent = (s: Submission) => s.task.priority === 'USER_PRESENT';
const runMs = (s: Submission) => (s.answer?.ok ? Number(s.answer.response.placement?.runMs ?? 0) : Number.NaN);
const queueWaitMs = (s: Submission) => (s.answer?.ok ? Number(s.answer.response.placement?.queueWaitMs ?? 0) : Number.NaN);

test('a slow upstream: the queue grows to its bound and no further, a full queue answers RESOURCE_EXHAUSTED with a code, user-present tasks go first', async (t) => {
  const startedAtMs = performance.now();
  const bank = await startBankSimulator(t);
  // The bank handlers read the upstream's address from the env the workers inherit.
  process.env[bankUrlEnv] = bank.url;
  const stack = await startStack(t, {
    workers: ['w0', 'w1'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism: 4, handlers: 'bank' as const })),
    balancerCount: 1,
    balancerArgs: ['--max-queued-tasks', String(maxQueuedTasks)],
  });
  const balancer = stack.balancers[0]!;
  const log = new TaskLog();
  const watch = new FleetWatch(stack, 100).start();
  // One task in eight has a user waiting; the rest are background refreshes.
  const load = startOpenLoad(t, log, {
    ratePerSecond: arrivalsPerSecond,
    maxOutstanding: 80,
    balancerFor: () => balancer,
    // The account and one page of transactions: mostly waiting on the bank, little CPU.
    taskFor: (seq) =>
      task({
        integration: 'bank-a',
        priority: seq % 8 === 0 ? 'USER_PRESENT' : 'BACKGROUND',
        payload: json({ maxPages: 1 }),
        deadlineUnixMs: Date.now() + 15_000,
      }),
  });
  // Warm: the first tasks open connections and compile code.
  await sleep(2000);
  const spikeAtMs = performance.now();
  await bank.startIncident({ bank: 'bank-a', kind: 'latency-spike', ...spike });
  const spikeEndsAtMs = spikeAtMs + spike.durationMs;
  await sleep(spike.durationMs + 3000);
  await load.stop();

  const balancerMetrics = await scrapeMetrics(balancer.metricsPort);
  const duringSpike = log.submissions.filter((s) => s.submittedAtMs >= spikeAtMs && s.submittedAtMs < spikeEndsAtMs && s.answer?.ok);
  const user = duringSpike.filter(isUserPresent);
  const background = duringSpike.filter((s) => !isUserPresent(s));
  const beforeSpike = log.submissions.filter((s) => s.submittedAtMs < spikeAtMs && s.answer?.ok);
  const queueEmptyAgain = watch.queueSamples.find((s) => s.atMs > spikeEndsAtMs && s.queued === 0);
  const result = await finishCase(t, stack, log, watch, {
    name: 'a slow upstream (latency spike)',
    startedAtMs,
    measuredMs: {
      taskRunP50BeforeSpike: Math.round(percentile(beforeSpike.map(runMs), 50)),
      taskRunP50DuringSpike: Math.round(percentile(duringSpike.map(runMs), 50)),
      backlogDrainedAfterSpike: degradedMs(log, spikeEndsAtMs, healthyLatencyMs),
      queueEmptyAfterSpike: queueEmptyAgain ? Math.round(queueEmptyAgain.atMs - spikeEndsAtMs) : -1,
      userPresentP50DuringSpike: Math.round(percentile(user.map(latencyMs), 50)),
      userPresentP95DuringSpike: Math.round(percentile(user.map(latencyMs), 95)),
      backgroundP50DuringSpike: Math.round(percentile(background.map(latencyMs), 50)),
      backgroundP95DuringSpike: Math.round(percentile(background.map(latencyMs), 95)),
      userPresentQueueWaitP95DuringSpike: Math.round(percentile(user.map(queueWaitMs), 95)),
      backgroundQueueWaitP50DuringSpike: Math.round(percentile(background.map(queueWaitMs), 50)),
    },
    figures: {
      maxQueuedTasks,
      mostQueuedSeen: watch.maxQueued(),
      queueFullTotal: balancerMetrics.sum('headroom_balancer_queue_full_total'),
      shedTotal: balancerMetrics.sum('headroom_balancer_shed_total'),
    },
  });

  // Within the bound, and it was reached: the spike did fill the queue.
  assert.ok(watch.maxQueued() <= maxQueuedTasks, `${watch.maxQueued()} queued, bound ${maxQueuedTasks}`);
  assert.ok(watch.maxQueued() >= maxQueuedTasks / 2, `the queue grew: ${watch.maxQueued()}`);
  const refused = log.submissions.filter((s) => s.answer && !s.answer.ok && ['HR_ERR_QUEUE_FULL', 'HR_ERR_SHED'].includes(s.answer.code));
  assert.ok(refused.length >= 1, `a full queue refused tasks: ${JSON.stringify(result.tally)}`);
  for (const s of refused) {
    assert.ok(s.answer && !s.answer.ok && s.answer.status === 8 /* RESOURCE_EXHAUSTED */ && s.answer.retryAfterMs !== undefined, JSON.stringify(s.answer));
  }
  assert.deepEqual(
    refused.filter(isUserPresent).map((s) => s.task.id),
    [],
    'no user-present task was refused or shed',
  );
  // User-present first: they waited less for a slot than background work, and were answered sooner.
  assert.ok(user.length >= 5 && background.length >= 5, `both kinds served during the spike: ${user.length} user-present, ${background.length} background`);
  assert.ok(percentile(user.map(latencyMs), 50) < percentile(background.map(latencyMs), 50), 'user-present answered sooner than background');
  assert.ok(percentile(user.map(queueWaitMs), 95) < percentile(background.map(queueWaitMs), 50), 'user-present waited less for a slot');
  assert.ok(queueEmptyAgain, 'the queue emptied once the spike was over');
});
