/**
 * What the REST API does with rollouts: start one from a plan, show it, pause, resume or abort
 * it. One rollout at a time: a second is refused while one runs or is paused. Every operator's
 * action and every autopilot decision is in the audit log.
 */
import { randomBytes } from 'node:crypto';
import { HeadroomError } from '@headroom/common';
import type { AuditLog } from '../audit';
import { apiErrorCodes } from '../errors';
import { autopilotActor, type Autopilot } from './autopilot';
import { describeStep } from './decide';
import { newIntent } from './intent';
import { completePlan, type Plan } from './plan';
import {
  finishedStatuses,
  rolloutChangedError,
  withDecision,
  type DecisionKind,
  type Rollout,
  type RolloutStatus,
  type RolloutStore,
  type StoredRollout,
} from './rollout-store';

export interface RolloutsView {
  /** The rollout running or paused now, else the latest finished one; null before the first. */
  current: Rollout | null;
  /** Finished rollouts, newest first (the latest 20). */
  history: Rollout[];
  /** Whether this control plane's autopilot holds the lease (one acts across replicas). */
  actingHere: boolean;
}

/** Writes that found the rollout changed are tried again this many times before HR_ERR_BUSY. */
const maxWriteAttempts = 3;

export class RolloutService {
  constructor(
    private readonly deps: {
      store: RolloutStore;
      autopilot: Autopilot;
      audit: AuditLog;
    },
  ) {}

  async view(): Promise<RolloutsView> {
    const [stored, history] = await Promise.all([this.deps.store.current(), this.deps.store.history()]);
    return { current: stored?.rollout ?? null, history, actingHere: this.deps.autopilot.acting };
  }

  async get(id: string): Promise<Rollout> {
    const { current, history } = await this.view();
    const found = [current, ...history].find((rollout) => rollout?.id === id);
    if (!found) throw new HeadroomError(apiErrorCodes.notFound, `no rollout ${id} (the latest 20 are kept; every decision is in the audit log)`);
    return found;
  }

  /** Starts a rollout: its first step takes effect now; the autopilot does the rest. */
  async start(parsed: Parameters<typeof completePlan>[0], actor: string): Promise<Rollout> {
    const plan: Plan = completePlan(parsed);
    const stored = await this.deps.store.current();
    if (stored && !finishedStatuses.includes(stored.rollout.status)) {
      throw new HeadroomError(
        apiErrorCodes.conflict,
        `rollout ${stored.rollout.id} (${stored.rollout.plan.name}) is ${stored.rollout.status}: abort it first; nothing was changed`,
      );
    }
    if (stored?.rollout.pending) {
      throw new HeadroomError(
        apiErrorCodes.busy,
        `rollout ${stored.rollout.id} has ended, but the autopilot is still finishing its last decision; nothing was changed, try again`,
        { retryAfterMs: 2000 },
      );
    }
    const now = Date.now();
    const first = plan.steps[0]!;
    let rollout = newRollout(plan, actor, now);
    rollout = withDecision(rollout, {
      atUnixMs: now,
      kind: 'start',
      step: 0,
      actor,
      message: `started by ${actor}; step 1 of ${plan.steps.length}: ${describeStep(first, rollout.maxParallelism)}`,
    });
    const entered = this.deps.autopilot.enterStep(rollout, first);
    // Written first, with the first step's actions as its intent: a second start at the same
    // moment loses the compare-and-set, not a flag write; a control plane that dies before they
    // are applied leaves them for the autopilot of any other to finish.
    rollout = { ...entered.rollout, pending: newIntent(entered.rollout, entered.actions, []) };
    const version = await this.deps.store.write(rollout, stored?.version ?? 0);
    if (typeof version !== 'number') throw rolloutChangedError();
    await this.deps.audit.record({ actor, action: 'rollout.start', target: rollout.id, request: parsed, before: null, after: summary(rollout), outcome: 'ok' });
    try {
      await this.deps.autopilot.finishIntent({ rollout, version });
    } catch (error) {
      // The first step did not (fully) take effect: the rollout ends rather than judge a step that
      // is not there, and its intent goes with it (the operator is told; nothing retries it).
      await this.transition(
        rollout.id,
        ['running'],
        'aborted',
        'abort',
        autopilotActor,
        `could not apply step 1: ${error instanceof Error ? error.message : String(error)}`,
        { pending: null },
      ).catch(() => undefined);
      throw error;
    }
    return { ...rollout, pending: null };
  }

  pause(id: string, actor: string, reason?: string): Promise<Rollout> {
    return this.transition(id, ['running'], 'paused', 'pause', actor, reason ?? `paused by ${actor}`);
  }

  resume(id: string, actor: string, reason?: string): Promise<Rollout> {
    return this.transition(id, ['paused'], 'running', 'resume', actor, reason ?? `resumed by ${actor}`);
  }

  /** Stops the autopilot; traffic and parallelism stay as they are (roll back separately if wanted). */
  abort(id: string, actor: string, reason?: string): Promise<Rollout> {
    return this.transition(id, ['running', 'paused'], 'aborted', 'abort', actor, reason ?? `aborted by ${actor}`);
  }

  /** `changes`: more fields to set with the status (the failed start's dropped intent). */
  private async transition(
    id: string,
    from: readonly RolloutStatus[],
    to: RolloutStatus,
    kind: DecisionKind,
    actor: string,
    message: string,
    changes: Partial<Rollout> = {},
  ): Promise<Rollout> {
    for (let attempt = 1; ; attempt++) {
      const stored = await this.currentWithId(id);
      const { rollout } = stored;
      if (!from.includes(rollout.status)) {
        throw new HeadroomError(apiErrorCodes.conflict, `rollout ${id} is ${rollout.status}; ${kind} needs it ${from.join(' or ')}; nothing was changed`);
      }
      const now = Date.now();
      // Resumed: the gates are judged again from windows after now, and must hold a whole hold again.
      const restarted = to === 'running' ? { stepStartedAtUnixMs: now, heldSinceUnixMs: null, closeSinceUnixMs: null } : {};
      const next = withDecision(
        { ...rollout, ...restarted, ...changes, status: to, waitingFor: null, finishedAtUnixMs: finishedStatuses.includes(to) ? now : null },
        { atUnixMs: now, kind, step: rollout.step, actor, message },
      );
      const written = await this.deps.store.write(next, stored.version);
      if (typeof written === 'number') {
        await this.deps.audit.record({
          actor,
          action: `rollout.${kind as 'pause' | 'resume' | 'abort'}`,
          target: id,
          before: summary(rollout),
          after: summary(next),
          outcome: 'ok',
          reason: message,
        });
        return next;
      }
      if (attempt >= maxWriteAttempts) throw rolloutChangedError();
    }
  }

  private async currentWithId(id: string): Promise<StoredRollout> {
    const stored = await this.deps.store.current();
    if (stored?.rollout.id === id) return stored;
    if ((await this.deps.store.history()).some((rollout) => rollout.id === id)) {
      throw new HeadroomError(apiErrorCodes.conflict, `rollout ${id} has finished; nothing was changed`);
    }
    throw new HeadroomError(apiErrorCodes.notFound, `no rollout ${id}; nothing was changed`);
  }
}

/** A rollout of `plan` started at `nowUnixMs`, in its first step, with nothing decided yet. */
export function newRollout(plan: Plan, createdBy: string, nowUnixMs: number): Rollout {
  const first = plan.steps[0]!;
  return {
    id: `ro-${randomBytes(5).toString('hex')}`,
    plan,
    status: 'running',
    createdBy,
    createdAtUnixMs: nowUnixMs,
    updatedAtUnixMs: nowUnixMs,
    finishedAtUnixMs: null,
    step: 0,
    stepStartedAtUnixMs: nowUnixMs,
    maxParallelism: first.search ? first.search.from : first.maxParallelism!,
    search: first.search ? { current: first.search.from, highestHeld: null } : null,
    baselineUntilUnixMs: first.candidatePercent === 100 ? nowUnixMs : null,
    heldSinceUnixMs: null,
    closeSinceUnixMs: null,
    rolledBack: [],
    waitingFor: null,
    closeGates: null,
    lastReading: null,
    decisions: [],
  };
}

/** What an audit entry keeps of a rollout besides the decision (the plan is in rollout.start's request). */
function summary(rollout: Rollout) {
  return {
    rollout: rollout.id,
    name: rollout.plan.name,
    status: rollout.status,
    step: rollout.step,
    maxParallelism: rollout.maxParallelism,
    rolledBack: rollout.rolledBack,
  };
}
