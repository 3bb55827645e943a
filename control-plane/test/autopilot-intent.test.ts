/**
 * The autopilot's decisions survive the death of the control plane taking them: one replica is
 * killed at each step boundary of a decision (right after its n-th call to the outside world:
 * the rollout write, an actuator, an audit entry), a second replica takes over once the lease
 * expired, and every action has taken effect once and every decision is recorded once.
 *
 * Real parts: Redis, PostgreSQL (the audit log), Unleash (the flags), two control planes on them.
 * The kill is simulated in process: from its n-th call on, the killed replica's store, actuators
 * and audit log only throw, so nothing it began after that point reaches the world, and it never
 * gives its lease up (a process killed with SIGKILL does not either).
 */
import { after, before, test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { LatencyRecorder } from '@headroom/fleet';
import { silentLogger } from '@headroom/common';
import { connected, eventually, operatorToken, startStack, type Stack } from '@headroom/testkit';
import { createControlPlane, defaultGates, type ControlPlane } from '../src/index';
import type { AuditEntry } from '../src/record/audit-entry';
import { Autopilot } from '../src/rollouts/autopilot';
import type { Plan } from '../src/rollouts/plan';
import { newRollout } from '../src/rollouts/rollout-service';
import { RolloutStore, type Rollout } from '../src/rollouts/rollout-store';
import { workerReport } from './worker-report';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/** The test's replicas take over from each other fast; the control planes' own autopilots tick once a minute, after the test. */
const leaseMs = 1000;
const controlPlaneOptions = { autopilotTickMs: 60_000, autopilotLeaseMs: 130_000 };

class SimulatedKill extends Error {}

/** Calls that reach outside the autopilot and change something: the step boundaries of a decision. */
const boundaryCalls = new Set(['write', 'setTraffic', 'setParallelism', 'rollback', 'record', 'recordOnce']);
const actuators = ['setTraffic', 'setParallelism', 'rollback'] as const;

interface Fate {
  /** The replica dies right after its n-th boundary call returns; null: it lives. */
  killAfter: number | null;
  calls: string[];
  dead: boolean;
}

/** `target` as the replica sees it: each boundary call counted; from the kill on, every call throws. */
function mortal<T extends object>(target: T, fate: Fate, tally: Map<string, number>): T {
  return new Proxy(target, {
    get(object, property) {
      const value: unknown = Reflect.get(object, property, object);
      if (typeof value !== 'function') return value;
      const name = String(property);
      return async (...args: unknown[]) => {
        if (fate.dead) throw new SimulatedKill(`killed before ${name}`);
        const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(object, args);
        if (!boundaryCalls.has(name)) return result;
        fate.calls.push(name);
        tally.set(name, (tally.get(name) ?? 0) + 1);
        if (fate.calls.length === fate.killAfter) {
          fate.dead = true;
          throw new SimulatedKill(`killed after ${fate.calls.join(', ')}`);
        }
        return result;
      };
    },
  });
}

/** A second control plane on the stack's Redis, PostgreSQL schema and Unleash flags: another replica. */
async function secondControlPlane(t: TestContext, stack: Stack): Promise<ControlPlane> {
  const subscriber = await connected(undefined, true);
  const controlPlane = await createControlPlane(
    {
      integrations: ['bank-a', 'bank-b'],
      unleash: {
        url: unleash.url,
        adminToken: unleash.adminToken,
        candidateFlag: stack.flagNames.candidateCluster,
        parallelismFlag: stack.flagNames.maxParallelism,
      },
      tokens: [{ name: 'olga', role: 'operator', token: operatorToken }],
      database: { url: stack.database.url, schema: stack.database.schema },
      ...controlPlaneOptions,
    },
    { redis: stack.fleet.redis, subscriber, keyPrefix: stack.fleet.ledgerOptions.keyPrefix! },
  );
  // Runs after startStack's hooks (in the order registered): by then only its own connections and timers are left to stop.
  t.after(async () => {
    await controlPlane.close();
    subscriber.disconnect();
  });
  return controlPlane;
}

const healthyWorker = () => workerReport({ atUnixMs: Date.now() });

function replica(controlPlane: ControlPlane, stack: Stack, fate: Fate, tally: Map<string, number>): Autopilot {
  const keyPrefix = stack.fleet.ledgerOptions.keyPrefix!;
  return new Autopilot({
    store: mortal(new RolloutStore(stack.fleet.redis, keyPrefix), fate, tally),
    service: mortal(controlPlane.service, fate, tally),
    audit: mortal(controlPlane.audit, fate, tally),
    redis: stack.fleet.redis,
    keyPrefix,
    clusters: { baseline: 'baseline', candidate: 'candidate' },
    candidateReports: async () => [healthyWorker()],
    logger: silentLogger,
    options: { tickMs: 100, leaseMs, settleMs: 0 },
  });
}

const plan: Plan = {
  name: 'kill-test',
  integrations: ['bank-a', 'bank-b'],
  windowSeconds: 10,
  holdSeconds: 10,
  minSamples: 20,
  gates: { ...defaultGates, p50Ratio: 1.5, p95Ratio: 4, gcShare: 0.9, eventLoopUtilization: 1, eventLoopDelayP99Ms: 5000, heapShare: 0.95 },
  steps: [
    { candidatePercent: 20, maxParallelism: 2, holdSeconds: 10 },
    { candidatePercent: 50, maxParallelism: 4, holdSeconds: 10 },
  ],
};

/** Step 1 of `plan`, begun an hour ago and held since: the next tick decides on the figures in Redis now. */
function heldRollout(): Rollout {
  const longAgo = Date.now() - 3_600_000;
  return { ...newRollout(plan, 'olga', longAgo), heldSinceUnixMs: longAgo };
}

/**
 * Two replicas on one stack, step 1 of `plan` in effect, and latency in Redis as the workers would
 * report it (20 ms on both clusters; bank-b at `bankBCandidateMs` on the candidate).
 */
async function scenario(t: TestContext, bankBCandidateMs: number) {
  const stack = await startStack(t, unleash, controlPlaneOptions);
  const second = await secondControlPlane(t, stack);
  const keyPrefix = stack.fleet.ledgerOptions.keyPrefix!;
  await stack.controlPlane.service.setTraffic({ integrations: { 'bank-a': 20, 'bank-b': 20 } }, 'olga');
  await stack.controlPlane.service.setParallelism({ candidate: 2 }, 'olga');
  for (const cluster of ['baseline', 'candidate']) {
    const recorder = new LatencyRecorder(stack.fleet.redis, { keyPrefix, cluster });
    for (let i = 0; i < 40; i++) {
      recorder.record('bank-a', 20);
      recorder.record('bank-b', cluster === 'candidate' ? bankBCandidateMs : 20);
    }
    await recorder.flush();
  }
  const rollout = heldRollout();
  const store = new RolloutStore(stack.fleet.redis, keyPrefix);
  assert.equal(await store.write(rollout, 0), 1);
  return { stack, second, store, id: rollout.id };
}

/** Kills replica A after its `killAfter`-th boundary call, lets B take over, and returns what both did. */
async function killAndTakeOver(stack: Stack, second: ControlPlane, store: RolloutStore, killAfter: number, meanwhile?: () => Promise<void>) {
  const tally = new Map<string, number>();
  const fateA: Fate = { killAfter, calls: [], dead: false };
  const a = replica(stack.controlPlane, stack, fateA, tally);
  const b = replica(second, stack, { killAfter: null, calls: [], dead: false }, tally);
  await a.tick().catch((error: unknown) => {
    if (!(error instanceof SimulatedKill)) throw error;
  });
  assert.ok(fateA.dead, `A was killed after ${killAfter} calls (it made: ${fateA.calls.join(', ')})`);
  await meanwhile?.();
  // B acts once A's lease has expired, and finishes what A left before deciding anything new.
  await eventually('B to take over and leave no decision pending', 20_000, async () => {
    await b.tick();
    const current = await store.current();
    return b.acting && !(current!.rollout as { pending?: unknown }).pending ? true : undefined;
  });
  // One more look: nothing is applied again.
  await b.tick();
  await b.stop();
  const entries = await stack.controlPlane.audit.list({ limit: 200 });
  return { tally, entries, stored: (await store.current())!, fateA };
}

const count = (tally: Map<string, number>) => Object.fromEntries(actuators.map((name) => [name, tally.get(name) ?? 0]));
const decisionsOf = (entries: AuditEntry[], id: string) =>
  entries.filter((e) => e.action === 'rollout.decision' && (e.after as { rollout: string }).rollout === id).map((e) => (e.after as { kind: string }).kind);
const byAutopilot = (entries: AuditEntry[], action: string) => entries.filter((e) => e.actor === 'autopilot' && e.action === action).length;

// A's boundary calls when it takes the next step: 1 the intent write, 2 traffic, 3 parallelism, 4 the decision's entry, 5 the clear.
const stepKills: Array<[string, number]> = [
  ['after the intent is written', 1],
  ['after the traffic action', 2],
  ['after the parallelism action', 3],
  ["after the decision's audit entry, before the clear", 4],
];
for (const [when, killAfter] of stepKills) {
  test(`a replica killed ${when} of a step: the other takes over; each action once, the decision recorded once`, { timeout: 90_000 }, async (t) => {
    const { stack, second, store, id } = await scenario(t, 20);
    const { tally, entries, stored, fateA } = await killAndTakeOver(stack, second, store, killAfter);
    const what = `A made ${fateA.calls.join(', ')}; calls: ${JSON.stringify(count(tally))}`;
    assert.deepEqual(count(tally), { setTraffic: 1, setParallelism: 1, rollback: 0 }, what);
    assert.deepEqual(decisionsOf(entries, id), ['step'], what);
    assert.equal(byAutopilot(entries, 'traffic.set'), 1, what);
    assert.equal(byAutopilot(entries, 'parallelism.set'), 1, what);
    const traffic = await second.service.traffic();
    assert.deepEqual([traffic.flag.integrations['bank-a']!.percent, traffic.flag.integrations['bank-b']!.percent], [50, 50]);
    assert.equal((await second.service.parallelism())['candidate'], 4);
    assert.equal(stored.rollout.status, 'running');
    assert.equal(stored.rollout.step, 1);
    assert.equal(stored.rollout.maxParallelism, 4);
    assert.deepEqual(
      stored.rollout.decisions.map((d) => d.kind),
      ['step'],
    );
  });
}

// A's boundary calls when it rolls bank-b back: 1 the intent write, 2 the rollback, 3 the decision's entry, 4 the clear.
const rollbackKills: Array<[string, number]> = [
  ['after the intent is written', 1],
  ['after the rollback action', 2],
  ["after the decision's audit entry, before the clear", 3],
];
for (const [when, killAfter] of rollbackKills) {
  test(`a replica killed ${when} of a rollback: bank-b is rolled back once, the decision recorded once`, { timeout: 90_000 }, async (t) => {
    // bank-b four times slower on the candidate: its p50 ratio breaks the line of 1.5.
    const { stack, second, store, id } = await scenario(t, 80);
    const { tally, entries, stored, fateA } = await killAndTakeOver(stack, second, store, killAfter);
    const what = `A made ${fateA.calls.join(', ')}; calls: ${JSON.stringify(count(tally))}`;
    assert.deepEqual(count(tally), { setTraffic: 0, setParallelism: 0, rollback: 1 }, what);
    assert.deepEqual(decisionsOf(entries, id), ['rollback'], what);
    // The rollback's own entry is written once its Unleash write is done (after the answer).
    await eventually("the rollback's own audit entry", 10_000, async () =>
      byAutopilot(await stack.controlPlane.audit.list({ limit: 200 }), 'rollback') > 0 ? true : undefined,
    );
    assert.equal(byAutopilot(await stack.controlPlane.audit.list({ limit: 200 }), 'rollback'), 1, what);
    const traffic = await second.service.traffic();
    assert.deepEqual(traffic.override?.integrations, ['bank-b']);
    assert.equal(traffic.flag.integrations['bank-b']!.rolledBack, true);
    assert.deepEqual(stored.rollout.rolledBack, ['bank-b']);
    assert.equal(stored.rollout.status, 'running');
    assert.deepEqual(
      stored.rollout.decisions.map((d) => d.kind),
      ['rollback'],
    );
  });
}

test(
  'an operator pauses while a dead replica left a step half done: the step is finished (the state says it happened), the rollout stays paused',
  { timeout: 90_000 },
  async (t) => {
    const { stack, second, store, id } = await scenario(t, 20);
    const { tally, entries, stored } = await killAndTakeOver(stack, second, store, 1, async () => {
      const paused = await stack.api('POST', `/rollouts/${id}/pause`, { reason: 'lunch' });
      assert.equal(paused.status, 200, JSON.stringify(paused.body));
    });
    assert.deepEqual(count(tally), { setTraffic: 1, setParallelism: 1, rollback: 0 });
    assert.deepEqual(decisionsOf(entries, id), ['step']);
    assert.equal((await second.service.parallelism())['candidate'], 4);
    assert.equal(stored.rollout.status, 'paused');
    assert.deepEqual(
      stored.rollout.decisions.map((d) => d.kind),
      ['step', 'pause'],
    );
    assert.equal(entries.filter((e) => e.action === 'rollout.pause' && e.target === id).length, 1);
  },
);
