/**
 * The autopilot: walks a rollout plan step by step, judged by the gates (gates.ts), with the
 * actuators an operator has (traffic per integration, the candidate's max parallelism, the
 * acknowledged rollback), as the autopilot's own actor in the audit log.
 *
 * Every control plane runs one; only the holder of the lease in Redis acts (rollout-store.ts),
 * and it renews the lease at each tick: one that cannot (Redis away, another took over after
 * it stalled) stops acting at once, and its writes are refused by the fence. The state lives in
 * Redis, so a second control plane continues a rollout where the first left it.
 *
 * A decision is written before it is acted on, as a pending intent (intent.ts): at the start of
 * a tick, one left by this or another control plane is finished first, whatever the rollout's
 * status (a pause or abort that came meanwhile does not undo what the state already says
 * happened; it takes effect once the intent is finished).
 *
 * At each tick, for a running rollout:
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
import type { Logger } from '@headroom/common';
import { readLatency, type RedisConnection, type WorkerReport } from '@headroom/fleet';
import type { AuditLog } from '../audit';
import type { ControlService } from '../control-service';
import { describeGates, readGates, type GatesReading } from './gates';
import { autopilotActor, IntentRunner, newIntent } from './intent';
import type { PlanStep } from './plan';
import { withDecision, type Decision, type DecisionKind, type Rollout, type RolloutAction, type RolloutStore, type StoredRollout } from './rollout-store';

export { autopilotActor };

/** How many times the step's hold the gates must stay within their lines once one came close to its line. */
export const closeHoldFactor = 2;

export interface AutopilotOptions {
  /** How often the autopilot reads the gates and acts. */
  tickMs: number;
  /** How long the lease outlives its holder's last renewal: another control plane takes over after it. */
  leaseMs: number;
  /** How long after a window ends the workers' latency summaries are complete (they report every 5 s by default). */
  settleMs: number;
}

export interface AutopilotDeps {
  store: RolloutStore;
  service: ControlService;
  audit: AuditLog;
  redis: RedisConnection;
  keyPrefix: string;
  clusters: { baseline: string; candidate: string };
  /** The candidate cluster's workers' latest reports. */
  candidateReports(): Promise<WorkerReport[]>;
  logger: Logger;
  options: AutopilotOptions;
}

type Outcome = { rollout: Rollout; decisions: Decision[]; actions: RolloutAction[] };
type Note = (kind: DecisionKind, step: number, message: string, integration?: string) => void;
type Act = (action: RolloutAction) => void;

export class Autopilot {
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private leaseValue: string | null = null;
  private stopped = false;
  /** The intent being finished in this process (see finishIntent). */
  private finishing: Promise<unknown> = Promise.resolve();
  private readonly intents: IntentRunner;

  constructor(private readonly deps: AutopilotDeps) {
    this.intents = new IntentRunner({ store: deps.store, service: deps.service, audit: deps.audit, holdLease: (leaseValue) => this.holdLease(leaseValue) });
  }

  /** Whether this control plane holds the lease now. */
  get acting(): boolean {
    return this.leaseValue !== null;
  }

  start(): void {
    this.timer = setInterval(() => {
      if (this.ticking || this.stopped) return;
      this.ticking = this.tick()
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'autopilot tick failed'))
        .finally(() => (this.ticking = undefined));
    }, this.deps.options.tickMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.ticking;
    if (this.leaseValue) await this.deps.store.releaseLease(this.leaseValue);
    this.leaseValue = null;
  }

  /** One look at the rollout, and what it calls for. */
  async tick(nowUnixMs = Date.now()): Promise<void> {
    const stored = await this.deps.store.current();
    if (!stored || (stored.rollout.status !== 'running' && !stored.rollout.pending)) {
      // Nothing to act on: give the lease up, so that `acting` says so and the next rollout may start anywhere.
      if (this.leaseValue) await this.deps.store.releaseLease(this.leaseValue);
      this.leaseValue = null;
      return;
    }
    const lease = await this.deps.store.lease(this.deps.options.leaseMs).catch(() => null);
    if (lease !== this.leaseValue)
      this.deps.logger.info(
        { acting: lease !== null },
        lease ? 'autopilot: this control plane acts on the rollout' : 'autopilot: another control plane acts on the rollout',
      );
    this.leaseValue = lease;
    if (!lease) return;
    if (stored.rollout.pending) {
      // Left by a control plane that stopped mid-decision (or by a tick that failed): finished
      // before anything new is decided; the next tick decides on a fresh read.
      this.deps.logger.info({ intent: stored.rollout.pending.id }, 'autopilot: finishing a decision taken before');
      await this.finishIntent(stored, lease);
      return;
    }

    const { rollout } = stored;
    const reading = await this.read(rollout, nowUnixMs);
    const outcome = this.decide({ ...rollout, lastReading: reading }, reading, nowUnixMs);
    const acts = outcome.actions.length > 0 || outcome.decisions.length > 0;
    // Written before acting: whoever holds the lease after a crash finishes exactly this.
    const next: Rollout = { ...outcome.rollout, pending: acts ? newIntent(outcome.rollout, outcome.actions, outcome.decisions) : null };
    const written = await this.deps.store.write(next, stored.version, lease);
    if (written === 'lost-lease') return this.lostLease();
    if (written === 'changed') return; // An operator paused or aborted meanwhile: their word stands; the next tick sees it.
    if (acts) await this.finishIntent({ rollout: next, version: written }, lease);
  }

  /**
   * Finishes the rollout's intent: see intent.ts. Also the operator's start of a rollout, without
   * a lease (""). One at a time in this process: the start request and this autopilot's tick may
   * both find the same intent, and the second then finds its actions in place, its entries
   * recorded and the intent cleared, rather than racing the first through the same writes.
   */
  async finishIntent(stored: StoredRollout, leaseValue = ''): Promise<void> {
    const finished = this.finishing.then(() => this.intents.finish(stored, leaseValue));
    this.finishing = finished.catch(() => undefined);
    if ((await finished) === 'lost-lease') this.lostLease();
  }

  private lostLease(): void {
    this.leaseValue = null;
    this.deps.logger.warn('autopilot: lost the lease while acting; the next holder reads the rollout again and goes on from there');
  }

  private async read(rollout: Rollout, nowUnixMs: number): Promise<GatesReading> {
    const { plan } = rollout;
    const windowMs = plan.windowSeconds * 1000;
    // The window ends settleMs ago: the workers' summaries of later tasks may not be in yet.
    const latency = await readLatency(this.deps.redis, this.deps.keyPrefix, windowMs, { nowUnixMs: nowUnixMs - this.deps.options.settleMs });
    if (rollout.baselineUntilUnixMs !== null) {
      // Every task on the candidate: compare with the baseline's last window before that.
      const before = await readLatency(this.deps.redis, this.deps.keyPrefix, windowMs, { nowUnixMs: rollout.baselineUntilUnixMs });
      latency.set(this.deps.clusters.baseline, before.get(this.deps.clusters.baseline) ?? new Map());
    }
    const moving = plan.integrations.filter((integration) => !rollout.rolledBack.includes(integration));
    return readGates({
      gates: plan.gates,
      integrations: moving,
      windowSeconds: plan.windowSeconds,
      minSamples: plan.minSamples,
      clusters: this.deps.clusters,
      latency,
      // A report taken before the step (or the search's latest raise) describes what ran before it,
      // a worker's start or the parallelism before: not this step's to judge.
      candidateReports: (await this.deps.candidateReports()).filter((report) => report.atUnixMs >= rollout.stepStartedAtUnixMs),
      nowUnixMs,
    });
  }

  /** The next state, the decisions and the actions, as data: nothing is acted on here. */
  private decide(rollout: Rollout, reading: GatesReading, now: number): Outcome {
    const decisions: Decision[] = [];
    const actions: RolloutAction[] = [];
    const note: Note = (kind, step, message, integration) =>
      decisions.push({ atUnixMs: now, kind, step, message, actor: autopilotActor, ...(integration ? { integration } : {}) });
    const judged = this.judge(rollout, reading, now, note, (action) => actions.push(action));
    return { rollout: decisions.reduce(withDecision, judged), decisions, actions: lastPerTarget(actions) };
  }

  private judge(rollout: Rollout, reading: GatesReading, now: number, note: Note, act: Act): Rollout {
    const step = rollout.plan.steps[rollout.step]!;
    const search = rollout.search;

    // Breaches first, on any window that lies within the rollout: a step that hurts is undone
    // at once, though its window still holds tasks of the step before (which held). Not on
    // tasks from before the rollout began: they say nothing of its steps (a cold start, another
    // split).
    const breachesCount = now >= rollout.createdAtUnixMs + rollout.plan.windowSeconds * 1000 + this.deps.options.settleMs;
    const breachedIntegrations = breachesCount ? reading.integrations.filter((i) => i.status === 'breached') : [];
    const workersBreached = breachesCount && reading.workers.status === 'breached';
    if ((breachedIntegrations.length > 0 || workersBreached) && search && search.highestHeld !== null) {
      const why = [
        ...breachedIntegrations.map((i) => `${i.integration}: ${describeGates(i.gates, 'breached')}`),
        ...(workersBreached ? [`workers: ${describeGates(reading.workers.gates, 'breached')}`] : []),
      ].join('; ');
      act(this.parallelismAction(search.highestHeld));
      note('back-off', rollout.step, `max parallelism ${search.current} broke a gate (${why}); backed off to ${search.highestHeld}, the highest that held`);
      return this.nextStep({ ...rollout, maxParallelism: search.highestHeld, search: { ...search, current: search.highestHeld } }, now, note, act);
    }
    const toRollBack = workersBreached ? reading.integrations.map((i) => i.integration) : breachedIntegrations.map((i) => i.integration);
    for (const integration of toRollBack) {
      const figures = workersBreached
        ? `the candidate's workers: ${describeGates(reading.workers.gates, 'breached')}`
        : describeGates(reading.integrations.find((i) => i.integration === integration)!.gates, 'breached');
      act({ kind: 'rollback', integration, reason: `rollout ${rollout.plan.name} (${rollout.id}), step ${rollout.step + 1}: ${figures}` });
      rollout = { ...rollout, rolledBack: [...rollout.rolledBack, integration] };
      note('rollback', rollout.step, `rolled ${integration} back to the baseline: ${figures}`, integration);
    }
    if (rollout.rolledBack.length === rollout.plan.integrations.length) {
      note('rollback', rollout.step, 'every integration of the plan was rolled back: the rollout ends here');
      return { ...rollout, status: 'rolled-back', finishedAtUnixMs: now, waitingFor: null, heldSinceUnixMs: null };
    }
    if (toRollBack.length > 0) return { ...rollout, heldSinceUnixMs: null };

    // A gate counts only on windows that lie within the step.
    const judgedFromMs = rollout.stepStartedAtUnixMs + rollout.plan.windowSeconds * 1000 + this.deps.options.settleMs;
    const statuses = [...reading.integrations.map((i) => i.status), reading.workers.status];
    // Not before the step's first whole window: those figures are the step before's.
    const closeGates = now >= judgedFromMs && statuses.includes('close') ? closeGateNames(reading) : null;
    // Noted when a hold begins or holds on other gates, not at every tick the figures move; it names the gates with their figures.
    if (closeGates !== null && closeGates !== rollout.closeGates)
      note('hold', rollout.step, `holding: ${whatHolds(reading, 'close', rollout.plan.minSamples)}`);
    if (now < judgedFromMs || statuses.includes('not-enough-data') || statuses.includes('breached')) {
      const waitingFor =
        now < judgedFromMs
          ? `the step's first whole window (judged from ${new Date(judgedFromMs).toISOString()})`
          : whatHolds(reading, 'not-enough-data', rollout.plan.minSamples);
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
      const held = Math.floor((now - heldSince) / 1000);
      const waitingFor =
        closeSince === null
          ? `every gate to hold for ${step.holdSeconds} s (held ${held} s)`
          : `every gate to stay within its line for ${holdMs / 1000} s, ${closeHoldFactor}x the hold, since ${closeGates !== null ? whatHolds(reading, 'close', rollout.plan.minSamples) : 'a gate came close to its line'} (held ${held} s)`;
      return { ...rollout, heldSinceUnixMs: heldSince, closeSinceUnixMs: closeSince, closeGates, waitingFor };
    }
    const heldFor = `${holdMs / 1000} s${closeSince !== null ? ` (${closeHoldFactor}x the hold: a gate came close to its line, none crossed it)` : ''}`;

    // Every gate held for the whole hold.
    if (search && search.current < step.search!.max) {
      const raised = Math.min(step.search!.max, Math.ceil(search.current * step.search!.factor));
      act(this.parallelismAction(raised));
      note('raise', rollout.step, `max parallelism ${search.current} held for ${heldFor}; raised to ${raised}`);
      return {
        ...rollout,
        maxParallelism: raised,
        search: { current: raised, highestHeld: search.current },
        stepStartedAtUnixMs: now,
        heldSinceUnixMs: null,
        closeSinceUnixMs: null,
        waitingFor: null,
        closeGates: null,
      };
    }
    if (search) note('step', rollout.step, `max parallelism ${search.current} held for ${heldFor}: the highest the search tries`);
    return this.nextStep(rollout, now, note, act, search ? undefined : heldFor);
  }

  /** Takes the next step, or completes the rollout after the last; `heldFor`: how long the step's gates held, when that is why. */
  private nextStep(rollout: Rollout, now: number, note: Note, act: Act, heldFor?: string): Rollout {
    const index = rollout.step + 1;
    const step = rollout.plan.steps[index];
    const held = heldFor ? `every gate held for ${heldFor}; ` : '';
    if (!step) {
      note('complete', rollout.step, `${held}every step held; the candidate runs at max parallelism ${rollout.maxParallelism}`);
      return { ...rollout, status: 'completed', finishedAtUnixMs: now, waitingFor: null, heldSinceUnixMs: null, closeSinceUnixMs: null };
    }
    const applied = this.enterStep({ ...rollout, step: index }, step);
    applied.actions.forEach(act);
    note('step', index, `${held}step ${index + 1} of ${rollout.plan.steps.length}: ${describeStep(step, applied.rollout.maxParallelism)}`);
    const baselineUntilUnixMs = step.candidatePercent < 100 ? null : (rollout.baselineUntilUnixMs ?? now);
    return {
      ...applied.rollout,
      stepStartedAtUnixMs: now,
      baselineUntilUnixMs,
      heldSinceUnixMs: null,
      closeSinceUnixMs: null,
      waitingFor: null,
      closeGates: null,
    };
  }

  /** The rollout in `step`, and the actions that set its traffic and max parallelism (absolute values). */
  enterStep(rollout: Rollout, step: PlanStep): { rollout: Rollout; actions: RolloutAction[] } {
    const maxParallelism = step.search ? step.search.from : step.maxParallelism!;
    const moving = rollout.plan.integrations.filter((integration) => !rollout.rolledBack.includes(integration));
    const actions: RolloutAction[] = [
      { kind: 'traffic', percentByIntegration: Object.fromEntries(moving.map((integration) => [integration, step.candidatePercent])) },
      this.parallelismAction(maxParallelism),
    ];
    return { rollout: { ...rollout, maxParallelism, search: step.search ? { current: step.search.from, highestHeld: null } : null }, actions };
  }

  /**
   * Renews the lease right before an action: a control plane that stalled past its lease (and
   * so may have been replaced) does not act on what it read before the stall. Not held by the
   * operator's start of a rollout (finishIntent without a lease, see rollout-service.ts): that
   * one goes on whatever this process's autopilot holds, and its clear is checked by version.
   */
  private async holdLease(leaseValue: string): Promise<void> {
    if (leaseValue === '') return;
    const renewed = await this.deps.store.lease(this.deps.options.leaseMs);
    if (renewed !== leaseValue) {
      this.leaseValue = null;
      throw new Error('autopilot: the lease passed to another control plane before this one acted; it does not act');
    }
  }

  private parallelismAction(maxParallelism: number): RolloutAction {
    return { kind: 'parallelism', cluster: this.deps.clusters.candidate, maxParallelism };
  }
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
