import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { LatencyHistogram, latencyBucketOf, type WorkerReport } from '@headroom/fleet';
import { decideRollout } from '../src/rollouts/decide';
import { readGates, type GatesReading } from '../src/rollouts/gates';
import { completePlan, planSchema, type Plan } from '../src/rollouts/plan';
import { newRollout } from '../src/rollouts/rollout-service';
import type { Decision, DecisionKind, Rollout, RolloutAction } from '../src/rollouts/rollout-store';
import { workerReport } from './worker-report';

/** 2023-11-14T22:13:20.000Z: the rollout's start; `at(s)` is `s` seconds after it. */
const startUnixMs = 1_700_000_000_000;
const at = (seconds: number) => startUnixMs + seconds * 1000;
const options = { settleMs: 5000, candidateCluster: 'candidate' };

/**
 * A fixed step, a parallelism search, and every task on the candidate, with the defaults a plan
 * gets: 30 s windows, 60 s holds. A window is judged 35 s after it began (then 5 s to settle).
 */
const plan: Plan = completePlan(
  planSchema(['bank-a', 'bank-b']).parse({
    name: 'move banks',
    integrations: ['bank-a', 'bank-b'],
    minSamples: 10,
    steps: [
      { candidatePercent: 10, maxParallelism: 4 },
      { candidatePercent: 50, search: { from: 4, factor: 1.5, max: 8 } },
      { candidatePercent: 100, maxParallelism: 8 },
    ],
  }),
);

/** A rollout in step 1 since it began, with `overrides`. */
const running = (overrides: Partial<Rollout> = {}): Rollout => ({ ...newRollout(plan, 'alice', startUnixMs), id: 'r1', ...overrides });

/** A rollout in the search step (step 2) trying `current`, with the highest that held so far. */
const searching = (current: number, highestHeld: number | null, overrides: Partial<Rollout> = {}) =>
  running({ step: 1, maxParallelism: current, search: { current, highestHeld }, ...overrides });

/** A rollout in the last step (every task on the candidate) since 300 s. */
const lastStep = (overrides: Partial<Rollout> = {}) =>
  running({ step: 2, maxParallelism: 8, stepStartedAtUnixMs: at(300), baselineUntilUnixMs: at(300), ...overrides });

function tasks(bucket: number, count: number): LatencyHistogram {
  const histogram = new LatencyHistogram();
  histogram.add(bucket, count);
  return histogram;
}

/**
 * The baseline runs 40 tasks at 100 ms per integration; the candidate: `same`; `close`, one latency
 * bucket slower (p50 ratio 1.0905, near its line of 1.1); `slow`, two (1.1892, past it); `few`,
 * 3 tasks, below minSamples.
 */
const baselineBucket = latencyBucketOf(100);
const candidateTasks = {
  same: tasks(baselineBucket, 40),
  close: tasks(baselineBucket + 1, 40),
  slow: tasks(baselineBucket + 2, 40),
  few: tasks(baselineBucket, 3),
};

/** The gates read as the autopilot reads them, for the integrations still moving (the keys of `candidate`). */
function reading(candidate: Record<string, keyof typeof candidateTasks>, reports: WorkerReport[] = [workerReport()]): GatesReading {
  const integrations = Object.keys(candidate);
  return readGates({
    gates: plan.gates,
    integrations,
    windowSeconds: plan.windowSeconds,
    minSamples: plan.minSamples,
    clusters: { baseline: 'baseline', candidate: 'candidate' },
    latency: new Map([
      ['baseline', new Map(integrations.map((integration) => [integration, candidateTasks.same]))],
      ['candidate', new Map(integrations.map((integration) => [integration, candidateTasks[candidate[integration]!]]))],
    ]),
    candidateReports: reports,
    nowUnixMs: startUnixMs,
  });
}

const withinLines = reading({ 'bank-a': 'same', 'bank-b': 'same' });
const bankASlow = reading({ 'bank-a': 'slow', 'bank-b': 'same' });
const bankAClose = reading({ 'bank-a': 'close', 'bank-b': 'same' });
const workersBreached = [workerReport({ eventLoopDelayP99Ms: 250 })];

const traffic = (percent: number, integrations = plan.integrations): RolloutAction => ({
  kind: 'traffic',
  percentByIntegration: Object.fromEntries(integrations.map((integration) => [integration, percent])),
});
const parallelism = (maxParallelism: number): RolloutAction => ({ kind: 'parallelism', cluster: 'candidate', maxParallelism });
const rollback = (integration: string, step: number, figures: string): RolloutAction => ({
  kind: 'rollback',
  integration,
  reason: `rollout move banks (r1), step ${step}: ${figures}`,
});

const step2Message = "step 2 of 3: 50% of the plan's integrations on the candidate at max parallelism 4 (searching up to 8)";
const step3Message = "step 3 of 3: 100% of the plan's integrations on the candidate at max parallelism 8";
const bankAClosing = 'gates close to their lines: bank-a: p50Ratio 1.0905 near 1.1';

interface Row {
  name: string;
  rollout: Rollout;
  reading: GatesReading;
  nowUnixMs: number;
  /** Kind and message of each decision, in order. */
  decisions: [DecisionKind, string][];
  actions: RolloutAction[];
  /** The fields of the next state that say what was decided. */
  next: Partial<Rollout>;
}

const rows: Row[] = [
  {
    name: "an integration's gate breached: that integration is rolled back, the others go on",
    rollout: running({ heldSinceUnixMs: at(40) }),
    reading: bankASlow,
    nowUnixMs: at(50),
    decisions: [['rollback', 'rolled bank-a back to the baseline: p50Ratio 1.1892 > 1.1']],
    actions: [rollback('bank-a', 1, 'p50Ratio 1.1892 > 1.1')],
    next: { status: 'running', rolledBack: ['bank-a'], heldSinceUnixMs: null },
  },
  {
    name: "every integration's gate breached: each is rolled back, and the rollout ends",
    rollout: running(),
    reading: reading({ 'bank-a': 'slow', 'bank-b': 'slow' }),
    nowUnixMs: at(50),
    decisions: [
      ['rollback', 'rolled bank-a back to the baseline: p50Ratio 1.1892 > 1.1'],
      ['rollback', 'rolled bank-b back to the baseline: p50Ratio 1.1892 > 1.1'],
      ['rollback', 'every integration of the plan was rolled back: the rollout ends here'],
    ],
    actions: [rollback('bank-a', 1, 'p50Ratio 1.1892 > 1.1'), rollback('bank-b', 1, 'p50Ratio 1.1892 > 1.1')],
    next: { status: 'rolled-back', finishedAtUnixMs: at(50), rolledBack: ['bank-a', 'bank-b'] },
  },
  {
    name: "a gate of the candidate's workers breached: every integration is rolled back (the workers are shared)",
    rollout: running(),
    reading: reading({ 'bank-a': 'same', 'bank-b': 'same' }, workersBreached),
    nowUnixMs: at(50),
    decisions: [
      ['rollback', "rolled bank-a back to the baseline: the candidate's workers: eventLoopDelayP99Ms 250 > 200"],
      ['rollback', "rolled bank-b back to the baseline: the candidate's workers: eventLoopDelayP99Ms 250 > 200"],
      ['rollback', 'every integration of the plan was rolled back: the rollout ends here'],
    ],
    actions: [
      rollback('bank-a', 1, "the candidate's workers: eventLoopDelayP99Ms 250 > 200"),
      rollback('bank-b', 1, "the candidate's workers: eventLoopDelayP99Ms 250 > 200"),
    ],
    next: { status: 'rolled-back', finishedAtUnixMs: at(50), rolledBack: ['bank-a', 'bank-b'] },
  },
  {
    name: 'a worker gate breached, one integration rolled back already: the other is rolled back, the rollout ends',
    rollout: running({ rolledBack: ['bank-a'] }),
    reading: reading({ 'bank-b': 'same' }, workersBreached),
    nowUnixMs: at(50),
    decisions: [
      ['rollback', "rolled bank-b back to the baseline: the candidate's workers: eventLoopDelayP99Ms 250 > 200"],
      ['rollback', 'every integration of the plan was rolled back: the rollout ends here'],
    ],
    actions: [rollback('bank-b', 1, "the candidate's workers: eventLoopDelayP99Ms 250 > 200")],
    next: { status: 'rolled-back', rolledBack: ['bank-a', 'bank-b'] },
  },
  {
    name: "a breach before the rollout's first window has settled counts for nothing: it waits for that window",
    rollout: running(),
    reading: bankASlow,
    nowUnixMs: at(20),
    decisions: [],
    actions: [],
    next: { status: 'running', rolledBack: [], waitingFor: "the step's first whole window (judged from 2023-11-14T22:13:55.000Z)" },
  },
  {
    name: "before the step's first window has settled: it waits; a gate close to its line is not noted (the step before's figures)",
    rollout: lastStep(),
    reading: bankAClose,
    nowUnixMs: at(334),
    decisions: [],
    actions: [],
    next: { waitingFor: "the step's first whole window (judged from 2023-11-14T22:18:55.000Z)", closeGates: null, heldSinceUnixMs: null },
  },
  {
    name: 'not enough tasks of an integration: it waits, naming the samples, and the hold starts over',
    rollout: running({ heldSinceUnixMs: at(36) }),
    reading: reading({ 'bank-a': 'same', 'bank-b': 'few' }),
    nowUnixMs: at(40),
    decisions: [],
    actions: [],
    next: { waitingFor: 'enough data: bank-b ran 40 tasks on the baseline and 3 on the candidate (minSamples 10)', heldSinceUnixMs: null },
  },
  {
    name: 'no report from a candidate worker since the step began: it waits',
    rollout: running(),
    reading: reading({ 'bank-a': 'same', 'bank-b': 'same' }, []),
    nowUnixMs: at(40),
    decisions: [],
    actions: [],
    next: { waitingFor: 'enough data: no report from a candidate worker since the step began', heldSinceUnixMs: null },
  },
  {
    name: 'every gate within its line for the first time: the hold starts',
    rollout: running(),
    reading: withinLines,
    nowUnixMs: at(40),
    decisions: [],
    actions: [],
    next: { heldSinceUnixMs: at(40), closeSinceUnixMs: null, waitingFor: 'every gate to hold for 60 s (held 0 s)' },
  },
  {
    name: 'hold not over yet: it goes on holding',
    rollout: running({ heldSinceUnixMs: at(40) }),
    reading: withinLines,
    nowUnixMs: at(70),
    decisions: [],
    actions: [],
    next: { step: 0, heldSinceUnixMs: at(40), waitingFor: 'every gate to hold for 60 s (held 30 s)' },
  },
  {
    name: 'hold over: the next step, with its traffic and max parallelism',
    rollout: running({ heldSinceUnixMs: at(40) }),
    reading: withinLines,
    nowUnixMs: at(100),
    decisions: [['step', `every gate held for 60 s; ${step2Message}`]],
    actions: [traffic(50), parallelism(4)],
    next: { step: 1, stepStartedAtUnixMs: at(100), maxParallelism: 4, search: { current: 4, highestHeld: null }, heldSinceUnixMs: null, waitingFor: null },
  },
  {
    name: 'hold over with an integration rolled back: the next step moves only the others',
    rollout: running({ heldSinceUnixMs: at(40), rolledBack: ['bank-a'] }),
    reading: reading({ 'bank-b': 'same' }),
    nowUnixMs: at(100),
    decisions: [['step', `every gate held for 60 s; ${step2Message}`]],
    actions: [traffic(50, ['bank-b']), parallelism(4)],
    next: { step: 1, rolledBack: ['bank-a'] },
  },
  {
    name: 'hold over at the last step: the rollout completes',
    rollout: lastStep({ heldSinceUnixMs: at(335) }),
    reading: withinLines,
    nowUnixMs: at(395),
    decisions: [['complete', 'every gate held for 60 s; every step held; the candidate runs at max parallelism 8']],
    actions: [],
    next: { status: 'completed', finishedAtUnixMs: at(395), step: 2, waitingFor: null },
  },
  {
    name: 'a gate close to its line: noted with its figures, and the hold doubles',
    rollout: running(),
    reading: bankAClose,
    nowUnixMs: at(40),
    decisions: [['hold', `holding: ${bankAClosing}`]],
    actions: [],
    next: {
      heldSinceUnixMs: at(40),
      closeSinceUnixMs: at(40),
      closeGates: 'bank-a:p50Ratio',
      waitingFor: `every gate to stay within its line for 120 s, 2x the hold, since ${bankAClosing} (held 0 s)`,
    },
  },
  {
    name: 'the same gate still close past the plain hold: not noted again, and it holds on (twice as long)',
    rollout: running({ heldSinceUnixMs: at(40), closeSinceUnixMs: at(40), closeGates: 'bank-a:p50Ratio' }),
    reading: bankAClose,
    nowUnixMs: at(100),
    decisions: [],
    actions: [],
    next: {
      step: 0,
      closeGates: 'bank-a:p50Ratio',
      waitingFor: `every gate to stay within its line for 120 s, 2x the hold, since ${bankAClosing} (held 60 s)`,
    },
  },
  {
    name: 'another gate comes close as well: noted again, with both',
    rollout: running({ heldSinceUnixMs: at(40), closeSinceUnixMs: at(40), closeGates: 'bank-a:p50Ratio' }),
    reading: reading({ 'bank-a': 'close', 'bank-b': 'same' }, [workerReport({ heapUsedBytes: 780 })]),
    nowUnixMs: at(70),
    decisions: [['hold', `holding: ${bankAClosing}; workers: heapShare 0.78 near 0.85`]],
    actions: [],
    next: { closeGates: 'bank-a:p50Ratio,workers:heapShare', heldSinceUnixMs: at(40), closeSinceUnixMs: at(40) },
  },
  {
    name: 'a gate that came close is back within its line: the hold stays doubled',
    rollout: running({ heldSinceUnixMs: at(40), closeSinceUnixMs: at(40), closeGates: 'bank-a:p50Ratio' }),
    reading: withinLines,
    nowUnixMs: at(100),
    decisions: [],
    actions: [],
    next: {
      step: 0,
      closeGates: null,
      waitingFor: 'every gate to stay within its line for 120 s, 2x the hold, since a gate came close to its line (held 60 s)',
    },
  },
  {
    name: 'a gate close to its line for the whole doubled hold, none crossed: it counts as held, the next step',
    rollout: running({ heldSinceUnixMs: at(40), closeSinceUnixMs: at(40), closeGates: 'bank-a:p50Ratio' }),
    reading: bankAClose,
    nowUnixMs: at(160),
    decisions: [['step', `every gate held for 120 s (2x the hold: a gate came close to its line, none crossed it); ${step2Message}`]],
    actions: [traffic(50), parallelism(4)],
    next: { step: 1, closeSinceUnixMs: null, closeGates: null, heldSinceUnixMs: null },
  },
  {
    name: 'search: the hold over below max: raised by the factor (4 x 1.5), judged from the raise on',
    rollout: searching(4, null, { stepStartedAtUnixMs: at(100), heldSinceUnixMs: at(135) }),
    reading: withinLines,
    nowUnixMs: at(195),
    decisions: [['raise', 'max parallelism 4 held for 60 s; raised to 6']],
    actions: [parallelism(6)],
    next: { step: 1, maxParallelism: 6, search: { current: 6, highestHeld: 4 }, stepStartedAtUnixMs: at(195), heldSinceUnixMs: null },
  },
  {
    name: 'search: a raise stops at max (6 x 1.5 = 9, max 8)',
    rollout: searching(6, 4, { stepStartedAtUnixMs: at(195), heldSinceUnixMs: at(230) }),
    reading: withinLines,
    nowUnixMs: at(290),
    decisions: [['raise', 'max parallelism 6 held for 60 s; raised to 8']],
    actions: [parallelism(8)],
    next: { step: 1, maxParallelism: 8, search: { current: 8, highestHeld: 6 }, stepStartedAtUnixMs: at(290) },
  },
  {
    name: 'search: max held: the search ends, the next step begins',
    rollout: searching(8, 6, { stepStartedAtUnixMs: at(290), heldSinceUnixMs: at(325) }),
    reading: withinLines,
    nowUnixMs: at(385),
    decisions: [
      ['step', 'max parallelism 8 held for 60 s: the highest the search tries'],
      ['step', step3Message],
    ],
    actions: [traffic(100), parallelism(8)],
    next: { step: 2, maxParallelism: 8, search: null, stepStartedAtUnixMs: at(385), baselineUntilUnixMs: at(385) },
  },
  {
    name: 'search (last step): a gate breaks after a raise: back-off to the highest that held, naming the gate; the rollout completes',
    rollout: searching(8, 6, { plan: { ...plan, steps: plan.steps.slice(0, 2) }, stepStartedAtUnixMs: at(290) }),
    reading: bankASlow,
    nowUnixMs: at(330),
    decisions: [
      ['back-off', 'max parallelism 8 broke a gate (bank-a: p50Ratio 1.1892 > 1.1); backed off to 6, the highest that held'],
      ['complete', 'every step held; the candidate runs at max parallelism 6'],
    ],
    actions: [parallelism(6)],
    next: { status: 'completed', maxParallelism: 6, search: { current: 6, highestHeld: 6 }, rolledBack: [] },
  },
  {
    name: 'search: a worker gate breaks after a raise: back-off naming it, nothing rolled back; the next step sets the parallelism',
    rollout: searching(6, 4, { stepStartedAtUnixMs: at(195) }),
    reading: reading({ 'bank-a': 'same', 'bank-b': 'same' }, workersBreached),
    nowUnixMs: at(230),
    decisions: [
      ['back-off', 'max parallelism 6 broke a gate (workers: eventLoopDelayP99Ms 250 > 200); backed off to 4, the highest that held'],
      ['step', step3Message],
    ],
    actions: [traffic(100), parallelism(8)],
    next: { status: 'running', step: 2, maxParallelism: 8, rolledBack: [], baselineUntilUnixMs: at(230) },
  },
  {
    name: 'search: a gate breaks before any raise held: the integration is rolled back, no back-off',
    rollout: searching(4, null, { stepStartedAtUnixMs: at(100) }),
    reading: bankASlow,
    nowUnixMs: at(140),
    decisions: [['rollback', 'rolled bank-a back to the baseline: p50Ratio 1.1892 > 1.1']],
    actions: [rollback('bank-a', 2, 'p50Ratio 1.1892 > 1.1')],
    next: { status: 'running', step: 1, rolledBack: ['bank-a'], search: { current: 4, highestHeld: null } },
  },
];

for (const row of rows) {
  test(`decideRollout: ${row.name}`, () => {
    const before = structuredClone(row.rollout);
    const outcome = decideRollout(row.rollout, row.reading, row.nowUnixMs, options);
    assert.deepEqual(
      outcome.decisions.map((d) => [d.kind, d.message]),
      row.decisions,
    );
    assert.deepEqual(outcome.actions, row.actions);
    const next = Object.fromEntries(Object.keys(row.next).map((key) => [key, outcome.rollout[key as keyof Rollout]]));
    assert.deepEqual(next, row.next);
    assert.deepEqual(row.rollout, before, 'the rollout given is left as it was');
  });
}

test('decideRollout: each decision says when, in which step, on which integration, by the autopilot; the next state keeps them and the reading', () => {
  const started: Decision = { atUnixMs: startUnixMs, kind: 'start', step: 0, message: 'started by alice', actor: 'alice' };
  const rolledBack = decideRollout(running({ decisions: [started] }), bankASlow, at(50), options);
  assert.deepEqual(rolledBack.decisions, [
    {
      atUnixMs: at(50),
      kind: 'rollback',
      step: 0,
      integration: 'bank-a',
      message: 'rolled bank-a back to the baseline: p50Ratio 1.1892 > 1.1',
      actor: 'autopilot',
    },
  ]);
  assert.deepEqual(rolledBack.rollout.decisions, [started, ...rolledBack.decisions]);
  assert.equal(rolledBack.rollout.updatedAtUnixMs, at(50));
  assert.equal(rolledBack.rollout.lastReading, bankASlow);

  // The search's end is noted in its step, the next step in the one it begins.
  const searchDone = decideRollout(searching(8, 6, { stepStartedAtUnixMs: at(290), heldSinceUnixMs: at(325) }), withinLines, at(385), options);
  assert.deepEqual(
    searchDone.decisions.map((d) => [d.kind, d.step, d.integration]),
    [
      ['step', 1, undefined],
      ['step', 2, undefined],
    ],
  );

  // Waiting decides nothing: the state changes, nothing to record or apply.
  const waiting = decideRollout(running(), withinLines, at(40), options);
  assert.deepEqual([waiting.decisions, waiting.actions, waiting.rollout.updatedAtUnixMs], [[], [], startUnixMs]);
});
