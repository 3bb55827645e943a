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
 * What a tick decides is decideRollout's (decide.ts), from the gates read here: this class reads,
 * holds the lease, writes the intent and applies it.
 */
import type { Logger } from '@headroom/common';
import { readLatency, type RedisConnection, type WorkerReport } from '@headroom/fleet';
import type { AuditLog } from '../audit';
import type { ControlService } from '../control-service';
import { decideRollout, enterPlanStep } from './decide';
import { readGates, type GatesReading } from './gates';
import { autopilotActor, IntentRunner, newIntent } from './intent';
import type { PlanStep } from './plan';
import type { Rollout, RolloutAction, RolloutStore, StoredRollout } from './rollout-store';

export { autopilotActor };

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
    const outcome = decideRollout(rollout, reading, nowUnixMs, { settleMs: this.deps.options.settleMs, candidateCluster: this.deps.clusters.candidate });
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

  /** The rollout in `step`, and the actions that set its traffic and max parallelism (absolute values). */
  enterStep(rollout: Rollout, step: PlanStep): { rollout: Rollout; actions: RolloutAction[] } {
    return enterPlanStep(rollout, step, this.deps.clusters.candidate);
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
}
