/**
 * A parallelism search on the bank workload: every bank-a task on one candidate worker process,
 * whose max parallelism the autopilot raises (from 14, x1.5, up to 30) while the gates hold
 * against the baseline's window before the rollout (two baseline worker processes at 4 tasks
 * each: the run time of an uncrowded worker). The search must keep the highest value that held
 * every gate for a whole hold, and back off from one that broke a gate, naming it; the candidate
 * must really have run that many tasks at once. Whether it reached the rollout's target (at least 20
 * with the p50 ratio within 1.1) is printed, not asserted: on this machine it depends on what else
 * runs on it.
 *
 * Measured here (2 cores shared with other work, load average 3-4), one page of transactions a
 * task (maxPages 1): 21 (30 broke gcShare, 0.12 > 0.1), 30 (every gate held) and 14 (21 broke the
 * p50 ratio, 1.19 > 1.1) in three runs. With the handlers' default four pages it stopped at 9: at
 * 14 tasks at once the candidate's event loop was busy 49% of the time (some 7.6 ms of CPU a task:
 * parsing, validating and gzipping ~180 KiB of JSON), its delay p99 40 ms, and its p50 one latency
 * bucket (9%) above the baseline's, then two (1.19 > 1.1). The p50 ratio moves in steps of 9% (the
 * latency buckets): "within 1.1" means at most one bucket slower than the baseline.
 *
 * One bucket slower at p50 (1.0905) is close to the line of 1.1: the autopilot then holds twice
 * the hold (20 s) before it counts the value as held. (It used to hold for as long as the ratio
 * stayed there: a CI run timed out at 30 with the p50 ratio at 1.0905 for two minutes.)
 *
 * From 14 rather than 4: each raise costs at least a window, the settle time and a hold (10 + 1.5
 * + 10 s here, 22 s measured), so 4 -> 6 -> 9 -> 14 -> 21 would spend some 90 s before trying 21;
 * from 14 the values 14, 21 and 30 are tried, and the test takes about 80 s. The decisions of a
 * search on every step (raise, back-off, stop at the max) are unit-tested on made-up readings;
 * this test is for the search on real workers.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { describeRollout, startRolloutStack, waitForRollout } from '../src/index';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/** Pages of transactions a task fetches (see the header: the CPU a task is what limits the search here). */
const searchMaxPages = 1;

test('a parallelism search on the bank workload (one page a task) keeps the highest max parallelism that held every gate', { timeout: 230_000 }, async (t) => {
  const startedAtMs = performance.now();
  const lanes = 32;
  const { stack, stopLoad } = await startRolloutStack(t, unleash, {
    workers: [
      { cluster: 'baseline', count: 2, maxParallelism: 4, asProcess: {} },
      { cluster: 'candidate', count: 1, maxParallelism: 4, asProcess: {} },
    ],
    // More lanes than the search's max: the candidate always has a task for every slot it offers.
    load: { integrations: ['bank-a'], lanes, maxDurationMs: 200_000, payload: { maxPages: searchMaxPages } },
  });
  const plan = {
    name: 'search',
    integrations: ['bank-a'],
    windowSeconds: 10,
    holdSeconds: 10,
    minSamples: 50,
    // The default lines, but the error rate's: bank-a fails some 1% of its tasks on either cluster, and one
    // failure more in a window of 100 tasks is not what this search is about.
    gates: { p50Ratio: 1.1, errorRateIncrease: 0.05 },
    steps: [{ candidatePercent: 100, search: { from: 14, factor: 1.5, max: 30 } }],
  };
  // The baseline's window before the rollout is what the candidate is compared with: one whole window of it.
  // Meanwhile the candidate takes a quarter of the tasks at its own 4, as a cluster already in service would:
  // a worker's first tasks (code not yet compiled, no connection to the bank) are not what the search measures.
  await stack.client.setTraffic({ integrations: { 'bank-a': 25 } });
  await sleep(plan.windowSeconds * 1000 + 2500);
  const started = await stack.client.startRollout(plan);
  const rolloutAtMs = performance.now();

  // How many tasks the candidate ran at once at each max parallelism: that the search was tested for real.
  const mostInFlight = new Map<number, number>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const candidate = (await stack.client.workers().catch(() => [])).find((w) => w.cluster === 'candidate');
      if (candidate) mostInFlight.set(candidate.maxParallelism, Math.max(mostInFlight.get(candidate.maxParallelism) ?? 0, candidate.inFlight));
      await sleep(500);
    }
  })();
  const finished = await waitForRollout(stack.client, started.id, 'the search to end', 180_000, (rollout) => rollout.status !== 'running').finally(async () => {
    sampling = false;
    await sampler;
  });
  const searchMs = performance.now() - rolloutAtMs;
  const load = await stopLoad();
  const decisions = finished.decisions.map((d) => `${Math.round((d.atUnixMs - finished.createdAtUnixMs) / 1000)} s ${d.kind}: ${d.message}`);
  const bankA = finished.lastReading?.integrations.find((i) => i.integration === 'bank-a');
  t.diagnostic(
    `found max parallelism ${finished.maxParallelism} (${finished.status}) in ${Math.round(searchMs / 1000)} s; decisions: ${decisions.join(' | ')}`,
  );
  t.diagnostic(
    `last reading: ${JSON.stringify(bankA?.gates.map((g) => `${g.gate} ${g.value}`))}, workers ${JSON.stringify(finished.lastReading?.workers.gates.map((g) => `${g.gate} ${g.value}`))}`,
  );
  t.diagnostic(
    `most tasks in flight on the candidate, by max parallelism: ${JSON.stringify(Object.fromEntries([...mostInFlight].sort((a, b) => a[0] - b[0])))}; load ${JSON.stringify(load)}; test ${Math.round((performance.now() - startedAtMs) / 1000)} s`,
  );

  t.diagnostic(
    `the rollout's target, at least 20 with the p50 ratio within 1.1: ${finished.maxParallelism >= 20 ? 'reached' : 'NOT reached'} here (${finished.maxParallelism})`,
  );

  assert.equal(finished.status, 'completed', describeRollout(finished));
  const { search } = plan.steps[0]!;
  const tried = [search.from];
  while (tried.at(-1)! < search.max) tried.push(Math.min(search.max, Math.ceil(tried.at(-1)! * search.factor)));
  const raises = finished.decisions.filter((d) => d.kind === 'raise');
  const backOff = finished.decisions.find((d) => d.kind === 'back-off');
  // Each raise was the next value of the series; the kept value is the last that held: the last raised-from value on a back-off, else the max.
  assert.deepEqual(
    raises.map((d) => Number(/raised to (\d+)/.exec(d.message)?.[1])),
    tried.slice(1, raises.length + 1),
    decisions.join('\n'),
  );
  if (backOff) {
    assert.match(
      backOff.message,
      /broke a gate \(.*(p50Ratio|p95Ratio|errorRateIncrease|gcShare|eventLoopUtilization|eventLoopDelayP99Ms|heapShare) \d+(\.\d+)? > /,
      'the back-off names the gate and its figure',
    );
    assert.equal(finished.maxParallelism, tried[raises.length - 1], decisions.join('\n'));
  } else {
    assert.equal(finished.maxParallelism, search.max, decisions.join('\n'));
  }
  assert.ok(finished.maxParallelism >= search.from);
  // The candidate really ran as many tasks at once as each value it tried allowed.
  for (const value of tried.slice(0, raises.length + 1)) {
    assert.ok((mostInFlight.get(value) ?? 0) >= 0.75 * value, `the candidate ran ${mostInFlight.get(value)} tasks at once at ${value}`);
  }
  assert.equal((await stack.client.parallelism()).candidate, finished.maxParallelism, 'the kept value is in effect');
});
