/**
 * The rollout's live state in Redis (what the autopilot needs to go on after a restart, from
 * any control plane); the record of it is the audit log. Every write is a compare-and-set on
 * the rollout's version, and the autopilot's writes are fenced by its lease too: a control
 * plane that lost the lease cannot overwrite what the new holder decided.
 */
import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '@headroom/fleet';
import { LedgerUnavailableError, controlKeys } from '@headroom/fleet';
import { HeadroomError } from '@headroom/common';
import { controlScripts, type ControlScript } from '../control-scripts';
import { apiErrorCodes } from '../errors';
import type { GatesReading } from './gates';
import type { Plan } from './plan';

export type RolloutStatus = 'running' | 'paused' | 'completed' | 'rolled-back' | 'aborted';
export const finishedStatuses: readonly RolloutStatus[] = ['completed', 'rolled-back', 'aborted'];

export type DecisionKind = 'start' | 'step' | 'raise' | 'back-off' | 'hold' | 'rollback' | 'complete' | 'pause' | 'resume' | 'abort';

export interface Decision {
  atUnixMs: number;
  kind: DecisionKind;
  /** The step it was taken in (0-based). */
  step: number;
  /** The integration it concerns, when one. */
  integration?: string;
  message: string;
  /** Who: "autopilot", or the operator's token name. */
  actor: string;
}

/** What a decision does, in absolute values: applying one twice leaves what applying it once did. */
export type RolloutAction =
  | { kind: 'traffic'; percentByIntegration: Record<string, number> }
  | { kind: 'parallelism'; cluster: string; maxParallelism: number }
  | { kind: 'rollback'; integration: string; reason: string };

/** A decision written before it is acted on, stored in the rollout; intent.ts applies it. */
export interface PendingIntent {
  /** Unique; with an action's or decision's index, the idempotency key of its audit entry. */
  id: string;
  actions: RolloutAction[];
  decisions: Decision[];
  /** What the decisions' audit entries say of the rollout: as decided, whoever records them (an operator may pause it meanwhile). */
  status: RolloutStatus;
  maxParallelism: number;
}

export interface ParallelismSearch {
  /** The max parallelism being tried now. */
  current: number;
  /** The highest that held for a whole hold; null before the first. */
  highestHeld: number | null;
}

export interface Rollout {
  id: string;
  plan: Plan;
  status: RolloutStatus;
  createdBy: string;
  createdAtUnixMs: number;
  updatedAtUnixMs: number;
  finishedAtUnixMs: number | null;
  /** The step in effect (0-based). */
  step: number;
  /** When the step (or the search's latest raise) took effect: gates are judged on windows after it. */
  stepStartedAtUnixMs: number;
  /** The candidate cluster's max parallelism the autopilot set. */
  maxParallelism: number;
  search: ParallelismSearch | null;
  /**
   * On a step that sends every task of the plan's integrations to the candidate, the baseline
   * runs none to compare with: the gates then compare with the baseline's window that ended here
   * (when the first such step began). null on other steps.
   */
  baselineUntilUnixMs: number | null;
  /** Since when every gate held (within its line) without a break; null while one does not. */
  heldSinceUnixMs: number | null;
  /**
   * Since when a gate has been close to its line in the current hold (which then lasts
   * closeHoldFactor times as long); null when none came close. Absent in rollouts stored before it.
   */
  closeSinceUnixMs?: number | null;
  /** Integrations rolled back (they stay on the baseline; the rest go on). */
  rolledBack: string[];
  /** Why the autopilot does not advance now: a gate close to its line, not enough data, a window still filling. */
  waitingFor: string | null;
  /** The gates close to their lines at the latest `hold` decision ("bank-a:p95Ratio,..."): a new one is recorded only when these change, not at every tick. */
  closeGates: string | null;
  lastReading: GatesReading | null;
  /** Newest last, at most maxDecisionsKept (the audit log keeps them all). */
  decisions: Decision[];
  /**
   * A decision written before it is acted on (intent.ts): its actions and audit entries are
   * being applied, or were left half done by a control plane that stopped. Absent or null: none.
   */
  pending?: PendingIntent | null;
}

export interface StoredRollout {
  rollout: Rollout;
  version: number;
}

export const maxDecisionsKept = 200;
const historyKept = 20;

export class RolloutStore {
  readonly owner = `${process.pid}-${randomBytes(6).toString('hex')}`;
  private readonly keys: ReturnType<typeof controlKeys>;
  private readonly scripts: ReturnType<typeof controlScripts>;

  constructor(
    private readonly redis: RedisConnection,
    keyPrefix: string,
  ) {
    this.keys = controlKeys(keyPrefix);
    this.scripts = controlScripts(redis);
  }

  async current(): Promise<StoredRollout | null> {
    const [json, version] = await this.guard('read rollout', () => this.redis.hmget(this.keys.rollout, 'json', 'version'));
    return json ? { rollout: JSON.parse(json) as Rollout, version: Number(version) } : null;
  }

  /** Finished rollouts, newest first. */
  async history(): Promise<Rollout[]> {
    const list = await this.guard('read rollout history', () => this.redis.lrange(this.keys.rolloutHistory, 0, historyKept - 1));
    return list.map((json) => JSON.parse(json) as Rollout);
  }

  /** Takes or renews the autopilot's lease; the lease value to fence writes with, or null when another control plane holds it. */
  async lease(leaseMs: number): Promise<string | null> {
    const fence = Number(await this.run('autopilot-lease', [this.keys.autopilotLease, this.keys.autopilotFence, this.owner, leaseMs]));
    return fence > 0 ? `${fence}:${this.owner}` : null;
  }

  /** Gives the lease up (at close), so that another control plane takes over without waiting for it to expire. */
  async releaseLease(leaseValue: string): Promise<void> {
    await this.redis
      .eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, this.keys.autopilotLease, leaseValue)
      .catch(() => undefined);
  }

  /**
   * Writes `rollout` if it is still at `version`; with `leaseValue`, only while that lease is held.
   * Resolves with the new version, or 'lost-lease' / 'changed' when the write did not happen.
   * A finished rollout goes to the history once its intent is cleared (the write that clears it).
   */
  async write(rollout: Rollout, version: number, leaseValue = ''): Promise<number | 'lost-lease' | 'changed'> {
    const finished = finishedStatuses.includes(rollout.status) && !rollout.pending ? 'finished' : '';
    const result = Number(
      await this.run('rollout-write', [
        this.keys.rollout,
        this.keys.autopilotLease,
        this.keys.rolloutHistory,
        version,
        JSON.stringify(rollout),
        leaseValue,
        finished,
        historyKept,
      ]),
    );
    return result === -1 ? 'lost-lease' : result === -2 ? 'changed' : result;
  }

  private async run(script: ControlScript, args: (string | number)[]): Promise<unknown> {
    return this.guard(script, () => this.scripts(script, args));
  }

  private async guard<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      if (error instanceof HeadroomError) throw error;
      throw new LedgerUnavailableError(what, error);
    }
  }
}

/** The rollout changed under an operator's request (another request or the autopilot): try again. */
export function rolloutChangedError(): HeadroomError {
  return new HeadroomError(
    apiErrorCodes.busy,
    'the rollout changed while this request was applied (the autopilot or another request); nothing was changed, try again',
    { retryAfterMs: 200 },
  );
}

/** Appends a decision, keeping the newest maxDecisionsKept. */
export function withDecision(rollout: Rollout, decision: Decision): Rollout {
  const decisions = [...rollout.decisions, decision];
  return { ...rollout, updatedAtUnixMs: decision.atUnixMs, decisions: decisions.slice(-maxDecisionsKept) };
}
