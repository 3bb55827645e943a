/**
 * What the autopilot decides at a tick, as data: the rollout's next state, the decisions to
 * record and the actions to apply. Pure: it reads nothing and acts on nothing (autopilot.ts reads
 * the gates, holds the lease and applies), so every rule below can be checked from a reading.
 *
 * For a running rollout:
 * - a breached gate on an integration rolls that integration back (the others go on); on a
 *   search step that has raised parallelism before, it backs off to the highest value that held
 *   and ends the step there instead. A breached gate on the candidate's workers backs a search
 *   off the same way, else rolls back every integration still moving: the workers are shared.
 * - else, once every gate has held for the step's hold time, judged on windows that lie within
 *   the step, it takes the next step (or, on a search step, the next raise); the last completes.
 *   A gate close to its line (90% of the way there) makes that hold twice as long, and is noted.
 * - else it waits, and says for what: not enough samples, the first window of the step still
 *   filling, the hold (with the figures of a gate close to its line).
 */
import { describeGates, type GatesReading, type IntegrationReading } from './gates';
import { autopilotActor } from './intent';
import type { PlanStep } from './plan';
import { withDecision, type Decision, type DecisionKind, type Rollout, type RolloutAction } from './rollout-store';

/** How many times the step's hold the gates must stay within their lines once one came close to its line. */
export const closeHoldFactor = 2;

export interface DecideOptions {
  /** How long after a window ends the workers' latency summaries are complete: a window is judged only this long after it ends. */
  settleMs: number;
  /** The candidate cluster, whose max parallelism the actions set. */
  candidateCluster: string;
}

export interface RolloutOutcome {
  /** The next state, with the reading it was decided on and the decisions appended. */
  rollout: Rollout;
  decisions: Decision[];
  /** At most one per target (see lastPerTarget), in absolute values. */
  actions: RolloutAction[];
}

/** What the rules below share at one tick: the clock, the options, and where decisions and actions go. */
interface Tick {
  nowUnixMs: number;
  options: DecideOptions;
  note(kind: DecisionKind, step: number, message: string, integration?: string): void;
  act(action: RolloutAction): void;
}

/** The gates breached at a tick: none before the rollout's first whole window. */
interface Breaches {
  integrations: IntegrationReading[];
  workers: boolean;
}

/** The next state, the decisions and the actions for `rollout` on `reading`, taken at `nowUnixMs`: nothing is acted on here. */
export function decideRollout(rollout: Rollout, reading: GatesReading, nowUnixMs: number, options: DecideOptions): RolloutOutcome {
  const decisions: Decision[] = [];
  const actions: RolloutAction[] = [];
  const tick: Tick = {
    nowUnixMs,
    options,
    note: (kind, step, message, integration) =>
      decisions.push({ atUnixMs: nowUnixMs, kind, step, message, actor: autopilotActor, ...(integration ? { integration } : {}) }),
    act: (action) => actions.push(action),
  };
  const judged = judge({ ...rollout, lastReading: reading }, reading, tick);
  return { rollout: decisions.reduce(withDecision, judged), decisions, actions: lastPerTarget(actions) };
}

function judge(rollout: Rollout, reading: GatesReading, tick: Tick): Rollout {
  const breaches = breachesIn(rollout, reading, tick);
  const breached = breaches.integrations.length > 0 || breaches.workers;
  const search = rollout.search;
  if (breached && search && search.highestHeld !== null) {
    return backOff(rollout, { current: search.current, highestHeld: search.highestHeld }, reading, breaches, tick);
  }
  return rollBack(rollout, reading, breaches, tick) ?? judgeHold(rollout, reading, tick);
}

/**
 * Breaches count on any window that lies within the rollout: a step that hurts is undone at
 * once, though its window still holds tasks of the step before (which held). Not on tasks from
 * before the rollout began: they say nothing of its steps (a cold start, another split).
 */
function breachesIn(rollout: Rollout, reading: GatesReading, tick: Tick): Breaches {
  const counts = tick.nowUnixMs >= rollout.createdAtUnixMs + rollout.plan.windowSeconds * 1000 + tick.options.settleMs;
  return {
    integrations: counts ? reading.integrations.filter((i) => i.status === 'breached') : [],
    workers: counts && reading.workers.status === 'breached',
  };
}

/** A search step that raised parallelism before: back to the highest value that held, and the step ends there. */
function backOff(rollout: Rollout, search: { current: number; highestHeld: number }, reading: GatesReading, breaches: Breaches, tick: Tick): Rollout {
  const { current, highestHeld } = search;
  const why = [
    ...breaches.integrations.map((i) => `${i.integration}: ${describeGates(i.gates, 'breached')}`),
    ...(breaches.workers ? [`workers: ${describeGates(reading.workers.gates, 'breached')}`] : []),
  ].join('; ');
  tick.act(parallelismAction(tick.options.candidateCluster, highestHeld));
  tick.note('back-off', rollout.step, `max parallelism ${current} broke a gate (${why}); backed off to ${highestHeld}, the highest that held`);
  return nextStep({ ...rollout, maxParallelism: highestHeld, search: { current: highestHeld, highestHeld } }, tick);
}

/**
 * Rolls back the integrations whose gates broke, or every one still moving when the candidate's
 * workers' did (they are shared). null when nothing is rolled back and the rollout goes on.
 */
function rollBack(rollout: Rollout, reading: GatesReading, breaches: Breaches, tick: Tick): Rollout | null {
  const toRollBack = (breaches.workers ? reading.integrations : breaches.integrations).map((i) => i.integration);
  for (const integration of toRollBack) {
    const figures = breaches.workers
      ? `the candidate's workers: ${describeGates(reading.workers.gates, 'breached')}`
      : describeGates(reading.integrations.find((i) => i.integration === integration)!.gates, 'breached');
    tick.act({ kind: 'rollback', integration, reason: `rollout ${rollout.plan.name} (${rollout.id}), step ${rollout.step + 1}: ${figures}` });
    rollout = { ...rollout, rolledBack: [...rollout.rolledBack, integration] };
    tick.note('rollback', rollout.step, `rolled ${integration} back to the baseline: ${figures}`, integration);
  }
  if (rollout.rolledBack.length === rollout.plan.integrations.length) {
    tick.note('rollback', rollout.step, 'every integration of the plan was rolled back: the rollout ends here');
    return { ...rollout, status: 'rolled-back', finishedAtUnixMs: tick.nowUnixMs, waitingFor: null, heldSinceUnixMs: null };
  }
  return toRollBack.length > 0 ? { ...rollout, heldSinceUnixMs: null } : null;
}

/** No breach that counts: waits for the step's first whole window, for enough data, or for the hold; advances once it is over. */
function judgeHold(rollout: Rollout, reading: GatesReading, tick: Tick): Rollout {
  const now = tick.nowUnixMs;
  const step = rollout.plan.steps[rollout.step]!;
  const { minSamples } = rollout.plan;
  // A gate counts only on windows that lie within the step.
  const judgedFromMs = rollout.stepStartedAtUnixMs + rollout.plan.windowSeconds * 1000 + tick.options.settleMs;
  const statuses = [...reading.integrations.map((i) => i.status), reading.workers.status];
  // Not before the step's first whole window: those figures are the step before's.
  const closeGates = now >= judgedFromMs && statuses.includes('close') ? closeGateNames(reading) : null;
  // Noted when a hold begins or holds on other gates, not at every tick the figures move; it names the gates with their figures.
  if (closeGates !== null && closeGates !== rollout.closeGates) tick.note('hold', rollout.step, `holding: ${whatHolds(reading, 'close', minSamples)}`);
  if (now < judgedFromMs || statuses.includes('not-enough-data') || statuses.includes('breached')) {
    const waitingFor =
      now < judgedFromMs
        ? `the step's first whole window (judged from ${new Date(judgedFromMs).toISOString()})`
        : whatHolds(reading, 'not-enough-data', minSamples);
    return { ...rollout, heldSinceUnixMs: null, closeSinceUnixMs: null, waitingFor, closeGates };
  }
  // Every gate within its line. One close to it makes the hold closeHoldFactor times as long: more
  // windows to tell whether it stays within. It does not stop the rollout for good: a latency ratio
  // moves in steps of one latency bucket (9%), so a candidate one bucket slower at p50 reads 1.09
  // against a line of 1.1 for as long as it runs, and would otherwise be held forever.
  const heldSince = rollout.heldSinceUnixMs ?? now;
  const closeSince = rollout.closeSinceUnixMs ?? (closeGates !== null ? now : null);
  const holdMs = step.holdSeconds * 1000 * (closeSince !== null ? closeHoldFactor : 1);
  if (now - heldSince < holdMs) {
    const heldSeconds = Math.floor((now - heldSince) / 1000);
    const waitingFor =
      closeSince === null
        ? `every gate to hold for ${step.holdSeconds} s (held ${heldSeconds} s)`
        : `every gate to stay within its line for ${holdMs / 1000} s, ${closeHoldFactor}x the hold, since ${closeGates !== null ? whatHolds(reading, 'close', minSamples) : 'a gate came close to its line'} (held ${heldSeconds} s)`;
    return { ...rollout, heldSinceUnixMs: heldSince, closeSinceUnixMs: closeSince, closeGates, waitingFor };
  }
  const heldFor = `${holdMs / 1000} s${closeSince !== null ? ` (${closeHoldFactor}x the hold: a gate came close to its line, none crossed it)` : ''}`;
  return advance(rollout, step, heldFor, tick);
}

/** Every gate held for the whole hold: the search's next raise, or the next step. */
function advance(rollout: Rollout, step: PlanStep, heldFor: string, tick: Tick): Rollout {
  const search = rollout.search;
  if (search && search.current < step.search!.max) {
    const raised = Math.min(step.search!.max, Math.ceil(search.current * step.search!.factor));
    tick.act(parallelismAction(tick.options.candidateCluster, raised));
    tick.note('raise', rollout.step, `max parallelism ${search.current} held for ${heldFor}; raised to ${raised}`);
    return {
      ...rollout,
      maxParallelism: raised,
      search: { current: raised, highestHeld: search.current },
      stepStartedAtUnixMs: tick.nowUnixMs,
      heldSinceUnixMs: null,
      closeSinceUnixMs: null,
      waitingFor: null,
      closeGates: null,
    };
  }
  if (search) tick.note('step', rollout.step, `max parallelism ${search.current} held for ${heldFor}: the highest the search tries`);
  return nextStep(rollout, tick, search ? undefined : heldFor);
}

/** Takes the next step, or completes the rollout after the last; `heldFor`: how long the step's gates held, when that is why. */
function nextStep(rollout: Rollout, tick: Tick, heldFor?: string): Rollout {
  const now = tick.nowUnixMs;
  const index = rollout.step + 1;
  const step = rollout.plan.steps[index];
  const held = heldFor ? `every gate held for ${heldFor}; ` : '';
  if (!step) {
    tick.note('complete', rollout.step, `${held}every step held; the candidate runs at max parallelism ${rollout.maxParallelism}`);
    return { ...rollout, status: 'completed', finishedAtUnixMs: now, waitingFor: null, heldSinceUnixMs: null, closeSinceUnixMs: null };
  }
  const entered = enterPlanStep({ ...rollout, step: index }, step, tick.options.candidateCluster);
  entered.actions.forEach((action) => tick.act(action));
  tick.note('step', index, `${held}step ${index + 1} of ${rollout.plan.steps.length}: ${describeStep(step, entered.rollout.maxParallelism)}`);
  const baselineUntilUnixMs = step.candidatePercent < 100 ? null : (rollout.baselineUntilUnixMs ?? now);
  return {
    ...entered.rollout,
    stepStartedAtUnixMs: now,
    baselineUntilUnixMs,
    heldSinceUnixMs: null,
    closeSinceUnixMs: null,
    waitingFor: null,
    closeGates: null,
  };
}

/** The rollout in `step`, and the actions that set its traffic and the candidate's max parallelism (absolute values). */
export function enterPlanStep(rollout: Rollout, step: PlanStep, candidateCluster: string): { rollout: Rollout; actions: RolloutAction[] } {
  const maxParallelism = step.search ? step.search.from : step.maxParallelism!;
  const moving = rollout.plan.integrations.filter((integration) => !rollout.rolledBack.includes(integration));
  const actions: RolloutAction[] = [
    { kind: 'traffic', percentByIntegration: Object.fromEntries(moving.map((integration) => [integration, step.candidatePercent])) },
    parallelismAction(candidateCluster, maxParallelism),
  ];
  return { rollout: { ...rollout, maxParallelism, search: step.search ? { current: step.search.from, highestHeld: null } : null }, actions };
}

function parallelismAction(cluster: string, maxParallelism: number): RolloutAction {
  return { kind: 'parallelism', cluster, maxParallelism };
}

/**
 * The actions with only the last one per target (a back-off, then the next step's parallelism):
 * the final values are what counts, and with one action per target, a value in place says that
 * action was applied (intent.ts), so a later one's effect is not taken for an earlier one's.
 */
function lastPerTarget(actions: readonly RolloutAction[]): RolloutAction[] {
  const target = (action: RolloutAction) =>
    action.kind === 'parallelism'
      ? `parallelism:${action.cluster}`
      : action.kind === 'rollback'
        ? `rollback:${action.integration}`
        : `traffic:${Object.keys(action.percentByIntegration).sort().join(',')}`;
  return actions.filter((action, index) => !actions.slice(index + 1).some((later) => target(later) === target(action)));
}

export function describeStep(step: PlanStep, maxParallelism: number): string {
  return `${step.candidatePercent}% of the plan's integrations on the candidate at max parallelism ${maxParallelism}${step.search ? ` (searching up to ${step.search.max})` : ''}`;
}

/** Which gates are close to their lines: "bank-a:p95Ratio,workers:heapShare". */
function closeGateNames(reading: GatesReading): string {
  return [
    ...reading.integrations.flatMap((i) => i.gates.filter((g) => g.status === 'close').map((g) => `${i.integration}:${g.gate}`)),
    ...reading.workers.gates.filter((g) => g.status === 'close').map((g) => `workers:${g.gate}`),
  ].join(',');
}

/** What keeps the autopilot from advancing: the gates close to their lines (with figures), or the data missing. */
function whatHolds(reading: GatesReading, status: 'close' | 'not-enough-data', minSamples: number): string {
  if (status === 'close') {
    return `gates close to their lines: ${[
      ...reading.integrations.filter((i) => i.status === 'close').map((i) => `${i.integration}: ${describeGates(i.gates, 'close')}`),
      ...(reading.workers.status === 'close' ? [`workers: ${describeGates(reading.workers.gates, 'close')}`] : []),
    ].join('; ')}`;
  }
  return `enough data: ${[
    ...reading.integrations
      .filter((i) => i.status === 'not-enough-data')
      .map((i) => `${i.integration} ran ${i.samples.baseline} tasks on the baseline and ${i.samples.candidate} on the candidate (minSamples ${minSamples})`),
    ...(reading.workers.status === 'not-enough-data' ? ['no report from a candidate worker since the step began'] : []),
  ].join('; ')}`;
}
