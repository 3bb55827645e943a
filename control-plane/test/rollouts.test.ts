/**
 * The rollout autopilot on a real stack: Redis, Unleash, the control plane, a balancer routing by
 * the traffic flag, workers of both clusters following the parallelism flag, and load.
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import type { HandlerMap } from '@headroom/worker';
import { LatencyRecorder } from '@headroom/fleet';
import { eventually, json, startStack, submit, task, viewerToken, type Stack } from '@headroom/testkit';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/** The autopilot acts fast and reads settled latency soon: workers report every 500 ms here. */
const controlPlaneOptions = { autopilotTickMs: 250, autopilotLeaseMs: 2000, latencySettleMs: 1000 };
/** Lines the in-process fleet cannot trip by itself: its workers share one event loop with the balancer and the load. */
const workerGates = { gcShare: 0.9, eventLoopUtilization: 1, eventLoopDelayP99Ms: 5000, heapShare: 0.95 };

/** Handlers that wait `ms` per integration (a network-bound task). */
const waiting = (msByIntegration: Record<string, number>): HandlerMap =>
  Object.fromEntries(
    Object.entries(msByIntegration).map(([integration, ms]) => [integration, async (_task, signal) => void (await sleep(ms, undefined, { signal }))]),
  );

async function fleetWithLoad(t: TestContext, candidateHandlers: HandlerMap): Promise<{ stack: Stack; stopLoad(): Promise<number> }> {
  const stack = await startStack(t, unleash, controlPlaneOptions);
  const { fleet } = stack;
  const baselineHandlers = waiting({ 'bank-a': 20, 'bank-b': 20 });
  for (const [cluster, handlers] of [
    ['baseline', baselineHandlers],
    ['candidate', candidateHandlers],
  ] as const) {
    for (let i = 0; i < 2; i++) {
      const { flags } = await stack.newFlagClient();
      await fleet.addWorker({ cluster, workerId: `${cluster}-${i}`, maxParallelism: 8, latencyReportIntervalMs: 500, reportIntervalMs: 500 }, handlers, flags);
    }
  }
  const { flags } = await stack.newFlagClient();
  await fleet.addBalancer({}, flags);
  // Closed-loop load through the balancer: 8 at a time, each task a new key of bank-a or bank-b; bounded in time and count.
  let stopped = false;
  let sent = 0;
  const deadline = Date.now() + 170_000;
  // A lane's failure is kept for stopLoad(): a test that fails first tears the fleet down under
  // the lanes, and their rejections must not end the file before its assertion is reported.
  const failures: unknown[] = [];
  const lanes = Array.from({ length: 8 }, async (_, lane) => {
    while (!stopped && Date.now() < deadline && sent < 200_000) {
      sent++;
      await submit(
        fleet.clients[0]!,
        task({ integration: lane % 2 === 0 ? 'bank-a' : 'bank-b', key: `key-${lane}-${sent}`, priority: 'BACKGROUND', payload: json({}) }),
        5000,
      );
    }
  }).map((lane) => lane.catch((error: unknown) => void failures.push(error)));
  return {
    stack,
    async stopLoad() {
      stopped = true;
      await Promise.all(lanes);
      if (failures.length > 0) throw failures[0];
      return sent;
    },
  };
}

test('bad plans get 400 naming the field, a viewer 403, a second rollout 409; nothing changes', async (t) => {
  const stack = await startStack(t, unleash, controlPlaneOptions);
  const plan = { name: 'p', integrations: ['bank-a'], windowSeconds: 10, holdSeconds: 10, steps: [{ candidatePercent: 10, maxParallelism: 2 }] };
  const cases: Array<[unknown, string, RegExp]> = [
    [{ ...plan, steps: [{ candidatePercent: 150, maxParallelism: 2 }] }, 'body.steps.0.candidatePercent', /from 0 to 100/],
    [
      {
        ...plan,
        steps: [
          { candidatePercent: 50, maxParallelism: 2 },
          { candidatePercent: 10, maxParallelism: 2 },
        ],
      },
      'body.steps.1.candidatePercent',
      /at least the step before's 50/,
    ],
    [{ ...plan, integrations: ['bank-z'] }, 'body.integrations.0', /unknown integration; accepted: bank-a, bank-b/],
    [{ ...plan, integrations: ['bank-a', 'bank-a'] }, 'body.integrations', /each integration once/],
    [{ ...plan, steps: [{ candidatePercent: 10, maxParallelism: 2, holdSeconds: 5 }] }, 'body.steps.0.holdSeconds', /at least windowSeconds \(10\)/],
    [{ ...plan, windowSeconds: 5 }, 'body.windowSeconds', /from 10 to 3600/],
    [
      { ...plan, steps: [{ candidatePercent: 10, maxParallelism: 2, search: { from: 2, max: 8 } }] },
      'body.steps.0.maxParallelism',
      /either maxParallelism or search/,
    ],
    [{ ...plan, steps: [{ candidatePercent: 10, search: { from: 8, max: 4 } }] }, 'body.steps.0.search.max', /max >= from/],
    [{ ...plan, steps: [] }, 'body.steps', /at least one step/],
    [{ ...plan, gates: { p50Ratio: 0.5 } }, 'body.gates.p50Ratio', /from 1 to 10/],
    [{ ...plan, surprise: true }, 'body.surprise', /unknown field/],
  ];
  for (const [body, field, message] of cases) {
    const answer = await stack.api('POST', '/rollouts', body);
    assert.equal(answer.status, 400, JSON.stringify(body));
    assert.equal(answer.body.error.code, 'HR_ERR_INVALID_REQUEST');
    const problem = answer.body.error.fields.find((f: { field: string }) => f.field === field);
    assert.ok(problem, `${field} named for ${JSON.stringify(body)}: ${JSON.stringify(answer.body.error.fields)}`);
    assert.match(problem.message, message);
  }
  assert.equal((await stack.api('POST', '/rollouts', plan, viewerToken)).status, 403);
  assert.deepEqual((await stack.api('GET', '/rollouts')).body.current, null, 'no rollout was started');
  assert.equal((await stack.api('GET', '/traffic')).body.effectivePercent.integrations['bank-a'], 0, 'no traffic was moved');

  const started = await stack.api('POST', '/rollouts', plan);
  assert.equal(started.status, 201, JSON.stringify(started.body));
  assert.equal((await stack.api('POST', '/rollouts', plan)).status, 409);
  assert.equal((await stack.api('POST', `/rollouts/${started.body.id}/resume`)).status, 409, 'resume needs a paused rollout');
  assert.equal((await stack.api('POST', '/rollouts/ro-0000000000/pause')).status, 404);
  assert.equal((await stack.api('POST', '/rollouts/nonsense/pause')).status, 400);
  assert.equal((await stack.api('POST', `/rollouts/${started.body.id}/pause`, { reason: 'lunch' })).body.status, 'paused');
  assert.equal((await stack.api('POST', `/rollouts/${started.body.id}/abort`)).body.status, 'aborted');
  const actions = (await stack.api('GET', '/audit?limit=20')).body.entries
    .filter((e: { action: string }) => e.action.startsWith('rollout.'))
    .map((e: { action: string; reason?: string }) => [e.action, e.reason]);
  assert.deepEqual(actions, [
    ['rollout.abort', 'aborted by olga'],
    ['rollout.pause', 'lunch'],
    ['rollout.start', undefined],
  ]);
});

test('a healthy plan of 3 steps completes; every decision is in the audit log with its figures', { timeout: 180_000 }, async (t) => {
  const { stack, stopLoad } = await fleetWithLoad(t, waiting({ 'bank-a': 20, 'bank-b': 20 }));
  const plan = {
    name: 'healthy',
    integrations: ['bank-a', 'bank-b'],
    windowSeconds: 10,
    holdSeconds: 10,
    minSamples: 20,
    // Both clusters run the same 20 ms tasks: only noise separates them. On a loaded machine
    // (the workers share one event loop with the load) a 10 s window's p95 moves by 2x and more.
    gates: { p50Ratio: 2, p95Ratio: 10, ...workerGates },
    steps: [
      { candidatePercent: 20, maxParallelism: 2 },
      { candidatePercent: 50, maxParallelism: 4 },
      { candidatePercent: 100, maxParallelism: 4 },
    ],
  };
  const started = await stack.api('POST', '/rollouts', plan);
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const id = started.body.id as string;
  assert.equal((await stack.api('GET', '/traffic')).body.effectivePercent.integrations['bank-a'], 20, 'the first step takes effect at once');
  assert.equal((await stack.api('GET', '/parallelism')).body.clusters.candidate, 2);

  const finished = await eventually('the rollout to finish', 150_000, async () => {
    const rollout = (await stack.api('GET', `/rollouts/${id}`)).body;
    // The state is written ahead of its actions and entries (docs/rollouts.md): done once no intent is pending.
    return rollout.status === 'running' || rollout.pending ? undefined : rollout;
  });
  await stopLoad();
  assert.equal(finished.status, 'completed', JSON.stringify(finished.decisions, null, 1));
  assert.deepEqual(finished.rolledBack, []);
  // A gate close to its line on noise makes a "hold" decision, which the machine's load decides: left out.
  assert.deepEqual(
    finished.decisions.filter((d: { kind: string }) => d.kind !== 'hold').map((d: { kind: string; step: number }) => [d.kind, d.step]),
    [
      ['start', 0],
      ['step', 1],
      ['step', 2],
      ['complete', 2],
    ],
  );
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.deepEqual([traffic.effectivePercent.integrations['bank-a'], traffic.effectivePercent.integrations['bank-b']], [100, 100]);
  assert.equal((await stack.api('GET', '/parallelism')).body.clusters.candidate, 4);
  assert.ok(
    stack.fleet.workers.filter((w) => w.cluster === 'candidate').every((w) => w.stats().maxParallelism === 4),
    'the candidate workers follow the flag',
  );
  // The last step compared the candidate with the baseline's window before it: figures, not "not enough data".
  assert.ok(
    finished.lastReading.integrations.every((i: { status: string }) => i.status === 'ok'),
    JSON.stringify(finished.lastReading),
  );

  const decisions = (await stack.api('GET', '/audit?action=rollout.decision&limit=100')).body.entries
    .reverse()
    .filter((e: { after: { kind: string } }) => e.after.kind !== 'hold');
  assert.deepEqual(
    decisions.map((e: { actor: string; after: { kind: string } }) => [e.actor, e.after.kind]),
    [
      ['autopilot', 'step'],
      ['autopilot', 'step'],
      ['autopilot', 'complete'],
    ],
  );
  for (const entry of decisions) {
    assert.equal(entry.target, id);
    assert.ok(entry.reason.length > 0);
    const readings = entry.after.reading.integrations;
    assert.deepEqual(
      readings.map((r: { integration: string }) => r.integration),
      ['bank-a', 'bank-b'],
    );
    assert.ok(
      readings.every((r: { gates: { gate: string; value: number | null }[] }) => r.gates.find((g) => g.gate === 'p50Ratio')!.value! > 0),
      'the figures the decision was taken on',
    );
  }
  const changes = (await stack.api('GET', '/audit?actor=autopilot&action=traffic.set')).body.entries;
  assert.deepEqual(
    changes.reverse().map((e: { after: { integrations: Record<string, { percent: number }> } }) => e.after.integrations['bank-a']?.percent),
    [20, 50, 100],
    'each step moved traffic once, as the autopilot',
  );
});

test('a slow candidate on one integration: the autopilot rolls that one back within two gate windows, the other ramps on', { timeout: 180_000 }, async (t) => {
  // The candidate runs bank-b four times slower: its p50 ratio is about 4.
  const { stack, stopLoad } = await fleetWithLoad(t, waiting({ 'bank-a': 20, 'bank-b': 80 }));
  const plan = {
    name: 'slow-bank-b',
    integrations: ['bank-a', 'bank-b'],
    windowSeconds: 10,
    holdSeconds: 10,
    minSamples: 20,
    gates: { p50Ratio: 1.5, p95Ratio: 4, ...workerGates },
    steps: [
      { candidatePercent: 30, maxParallelism: 4 },
      { candidatePercent: 60, maxParallelism: 4 },
    ],
  };
  const started = await stack.api('POST', '/rollouts', plan);
  assert.equal(started.status, 201, JSON.stringify(started.body));
  const startedAtMs = Date.now();
  const id = started.body.id as string;

  const rolledBack = await eventually('bank-b to be rolled back', 60_000, async () => {
    const rollout = (await stack.api('GET', `/rollouts/${id}`)).body;
    return rollout.rolledBack.includes('bank-b') && !rollout.pending ? rollout : undefined;
  });
  const detectedMs = Date.now() - startedAtMs;
  assert.ok(detectedMs < 2 * plan.windowSeconds * 1000 + 5000, `rolled back after ${detectedMs} ms`);
  const rollback = rolledBack.decisions.find((d: { kind: string }) => d.kind === 'rollback');
  assert.equal(rollback.integration, 'bank-b');
  assert.match(rollback.message, /rolled bank-b back to the baseline: p50Ratio \d+(\.\d+)? > 1\.5/);
  const traffic = (await stack.api('GET', '/traffic')).body;
  assert.equal(traffic.effectivePercent.integrations['bank-b'], 0, 'bank-b is back on the baseline');
  assert.deepEqual(traffic.override.integrations, ['bank-b']);
  assert.match(traffic.lastRollback.reason, /rollout slow-bank-b/);
  assert.equal(traffic.lastRollback.actor, 'autopilot');

  const finished = await eventually('the rollout to finish', 90_000, async () => {
    const rollout = (await stack.api('GET', `/rollouts/${id}`)).body;
    // The state is written ahead of its actions and entries (docs/rollouts.md): done once no intent is pending.
    return rollout.status === 'running' || rollout.pending ? undefined : rollout;
  });
  await stopLoad();
  assert.equal(finished.status, 'completed', JSON.stringify(finished.decisions, null, 1));
  assert.deepEqual(finished.rolledBack, ['bank-b']);
  assert.equal((await stack.api('GET', '/traffic')).body.effectivePercent.integrations['bank-a'], 60, 'bank-a ramped on');
  const rollbacks = (await stack.api('GET', '/audit?action=rollback&actor=autopilot')).body.entries;
  assert.deepEqual(
    rollbacks.map((e: { target: string }) => e.target),
    ['bank-b'],
  );
});

test(
  'a gate that stays close to its line without crossing it doubles the hold, then counts as held: the rollout is not held forever',
  { timeout: 120_000 },
  async (t) => {
    const stack = await startStack(t, unleash, controlPlaneOptions);
    // A candidate worker that runs nothing: its reports feed the worker gates (lenient here).
    await stack.fleet.addWorker({ cluster: 'candidate', workerId: 'candidate-0', maxParallelism: 8, reportIntervalMs: 500 });
    // Latency as the workers would report it, written straight to Redis: bank-a on the candidate is
    // exactly one latency bucket slower (21.5 ms against 20 ms: buckets 36 and 35), a p50 ratio of
    // 2^(1/8) = 1.0905, 90.5% of the way from 1 to the line of 1.1: close, and never over.
    const recorders = (['baseline', 'candidate'] as const).map((cluster) => ({
      recorder: new LatencyRecorder(stack.fleet.redis, { keyPrefix: stack.fleet.ledgerOptions.keyPrefix!, cluster }),
      ms: cluster === 'baseline' ? 20 : 21.5,
    }));
    let writing = true;
    const writer = (async () => {
      for (let round = 0; writing && round < 1000; round++) {
        for (const { recorder, ms } of recorders) {
          for (let i = 0; i < 20; i++) recorder.record('bank-a', ms);
          try {
            await recorder.flush();
          } catch (error) {
            // The stack's own after hook, added first, runs first and closes Redis: a flush then
            // in flight fails, which ends the writer; with Redis open, a failure fails the test.
            if (writing && stack.fleet.redis.status === 'ready') throw error;
            return;
          }
        }
        await sleep(250);
      }
    })();
    t.after(async () => {
      writing = false;
      await writer;
    });
    const plan = {
      name: 'near-the-line',
      integrations: ['bank-a'],
      windowSeconds: 10,
      holdSeconds: 10,
      minSamples: 20,
      gates: workerGates,
      steps: [{ candidatePercent: 50, maxParallelism: 8 }],
    };
    const started = await stack.api('POST', '/rollouts', plan);
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const id = started.body.id as string;
    const finished = await eventually('the rollout to finish', 90_000, async () => {
      const rollout = (await stack.api('GET', `/rollouts/${id}`)).body;
      // The state is written ahead of its actions and entries (docs/rollouts.md): done once no intent is pending.
      return rollout.status === 'running' || rollout.pending ? undefined : rollout;
    });
    const described = JSON.stringify(finished.decisions, null, 1);
    assert.equal(finished.status, 'completed', described);
    // A hold is recorded again whenever the set of close gates changes: on a loaded machine a
    // worker's event-loop utilisation may come near its line for a moment too.
    const kinds = finished.decisions.map((d: { kind: string }) => d.kind) as string[];
    assert.deepEqual([kinds[0], [...new Set(kinds.slice(1, -1))], kinds.at(-1)], ['start', ['hold'], 'complete'], described);
    const decisions = finished.decisions as { atUnixMs: number; message: string }[];
    const [start, hold] = decisions;
    const complete = decisions.at(-1);
    assert.match(hold!.message, /holding: gates close to their lines: bank-a: p50Ratio 1\.0905 near 1\.1/);
    assert.match(complete!.message, /every gate held for 20 s \(2x the hold: a gate came close to its line, none crossed it\)/);
    // Judged from the step's first whole window (10 s + 1 s to settle), then held twice the hold (20 s), not once (10 s).
    const judgedFromMs = plan.windowSeconds * 1000 + controlPlaneOptions.latencySettleMs;
    const tookMs = complete!.atUnixMs - start!.atUnixMs;
    assert.ok(tookMs >= judgedFromMs + 2 * plan.holdSeconds * 1000, `completed ${tookMs} ms after the start`);
    assert.equal(finished.lastReading.integrations[0].gates.find((g: { gate: string }) => g.gate === 'p50Ratio').status, 'close');
  },
);
