/**
 * Per-integration limits under a process fault, on real worker and balancer processes and a
 * private Redis: a balancer killed (kill -9) while it holds an integration at its limit. THE
 * INVARIANT (src/invariant.ts) is checked after it, per integration too.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { eventually } from '@headroom/testkit';
import { FleetWatch, TaskLog, assertConverged, demoTask, finishCase, sleep, startClosedLoad, startStack, type WorkerSpec } from '../src/index';

const workers: WorkerSpec[] = ['w0', 'w1'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism: 3 }));
const limitedIntegration = 'bank-a';
/** With two tasks of another integration, the limit fills both workers' 6 slots. */
const limitInFlight = 4;
/** Tasks of the limited integration run this long, so that a balancer holds its share while they run. */
const limitedTaskMs = 1500;
/** Worker heartbeats every 1 s: a lease nobody releases is dropped within 3 periods of its task's end. */
const shareBackBoundMs = limitedTaskMs + 3000 + 2000;

/** When the survivor's tasks of the integration had the whole limit running at once, after `fromMs`. */
function wholeShareAtMs(log: TaskLog, balancerId: string, fromMs: number): number | undefined {
  const runs = log.submissions
    .filter((s) => s.balancerId === balancerId && s.task.integration === limitedIntegration && s.answer?.ok && s.answeredAtMs !== undefined)
    .map((s) => ({ startMs: s.submittedAtMs + Number((s.answer?.ok && s.answer.response.placement?.queueWaitMs) || 0), endMs: s.answeredAtMs! }))
    .filter((run) => run.startMs > fromMs);
  const starts = runs.map((run) => run.startMs).sort((a, b) => a - b);
  return starts.find((at) => runs.filter((run) => run.startMs <= at && run.endMs > at).length >= limitInFlight);
}

test('kill -9 a balancer that holds an integration at its limit: the whole share comes back, the limit holds throughout, other integrations go on', async (t) => {
  const startedAtMs = performance.now();
  const stack = await startStack(t, { workers, balancerCount: 2 });
  await stack.ledger.setIntegrationLimit('baseline', limitedIntegration, { maxInFlight: limitInFlight });
  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  const [survivor, victim] = stack.balancers as [(typeof stack.balancers)[0], (typeof stack.balancers)[0]];
  // User-present: background tasks may not take the share of the limit kept for user-present ones.
  const limited = (deadlineMs: number) => demoTask({ priority: 'USER_PRESENT', integration: limitedIntegration, sleepMs: limitedTaskMs, deadlineMs });
  const inFlightOfLimited = async () => (await stack.ledger.integrationLimits('baseline')).find((s) => s.integration === limitedIntegration)?.inflight ?? 0;
  // The victim takes the whole limit first; then the survivor's tasks of it wait, beside others.
  const victimLoad = startClosedLoad(t, log, { lanes: 6, maxDurationMs: 60_000, balancerFor: () => victim, taskFor: () => limited(10_000) });
  await eventually(`the victim to hold ${limitInFlight} tasks of ${limitedIntegration}`, 20_000, async () =>
    (await inFlightOfLimited()) === limitInFlight ? true : undefined,
  );
  const survivorLoad = startClosedLoad(t, log, {
    lanes: 6,
    maxDurationMs: 60_000,
    balancerFor: () => survivor,
    taskFor: (lane) => (lane < limitInFlight ? limited(30_000) : demoTask({ integration: 'bank-b', sleepMs: 100 })),
  });
  let peakInFlight = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peakInFlight = Math.max(peakInFlight, await inFlightOfLimited());
      await sleep(25);
    }
  })();
  await sleep(500);
  const killedAtMs = performance.now();
  await stack.stop(victim, 'SIGKILL');
  // Its clients would only retry into a closed port.
  await victimLoad.stop();
  await eventually('the survivor to run the whole share', shareBackBoundMs + 15_000, () =>
    wholeShareAtMs(log, survivor.id, killedAtMs) !== undefined ? true : undefined,
  );
  await survivorLoad.stop();
  const convergedMs = await assertConverged(stack);
  sampling = false;
  await sampler;

  const shareBackMs = Math.round(wholeShareAtMs(log, survivor.id, killedAtMs)! - killedAtMs);
  const result = await finishCase(t, stack, log, watch, {
    name: 'kill -9 a balancer at its integration limit',
    startedAtMs,
    killedBalancerIds: [victim.id],
    measuredMs: { wholeShareBackAfterKill: shareBackMs, ledgerConverged: convergedMs },
    figures: { peakInFlight, limitInFlight },
  });
  assert.ok(peakInFlight <= limitInFlight, `${limitedIntegration} peaked at ${peakInFlight} in flight, limit ${limitInFlight}`);
  assert.ok(shareBackMs <= shareBackBoundMs, `the survivor ran ${limitInFlight} tasks of ${limitedIntegration} at once ${shareBackMs} ms after the kill`);
  const otherIntegration = log.submissions.filter((s) => s.task.integration === 'bank-b');
  assert.ok(otherIntegration.length > 10 && otherIntegration.every((s) => s.answer?.ok), `bank-b: ${otherIntegration.length} tasks, all served`);
  assert.equal(result.tally.lost, 0);
});
