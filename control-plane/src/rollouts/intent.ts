/**
 * The autopilot's write-ahead intent: a decision is written to the rollout (in the same fenced
 * compare-and-set as the state it leads to) before anything is acted on, as data: the actions
 * and the decisions to record. Then each action is applied unless its effect is in place
 * already, each decision is recorded once (an idempotency key in the audit log), and the intent
 * is cleared. A control plane that dies anywhere in between leaves the intent in Redis; whichever
 * holds the lease next finishes it, before it decides anything new, with the same keys: every
 * action takes effect once and every decision is recorded once, whoever finishes it.
 */
import { randomBytes } from 'node:crypto';
import type { AuditLog } from '../audit';
import type { ControlService } from '../control-service';
import type { Decision, PendingIntent, Rollout, RolloutAction, RolloutStore, StoredRollout } from './rollout-store';

export const autopilotActor = 'autopilot';

export function newIntent(rollout: Rollout, actions: RolloutAction[], decisions: Decision[]): PendingIntent {
  return { id: `${rollout.id}-${randomBytes(6).toString('hex')}`, actions, decisions, status: rollout.status, maxParallelism: rollout.maxParallelism };
}

/** A clear that finds the rollout changed (an operator's pause, resume or abort) reads it and tries again this many times. */
const maxClearAttempts = 3;

export interface IntentRunnerDeps {
  store: RolloutStore;
  service: ControlService;
  audit: AuditLog;
  /** Renews `leaseValue` right before an action ("" holds none); rejects when it passed to another control plane. */
  holdLease(leaseValue: string): Promise<void>;
}

export class IntentRunner {
  constructor(private readonly deps: IntentRunnerDeps) {}

  /**
   * Finishes the rollout's pending intent: the actions not in place yet, the decisions not
   * recorded yet, then the clear (fenced by `leaseValue`; "" for an operator's request). Rejects
   * when an action or an entry fails: the intent stays, and the next tick tries again.
   */
  async finish(stored: StoredRollout, leaseValue: string): Promise<'finished' | 'lost-lease'> {
    const intent = stored.rollout.pending;
    if (!intent) return 'finished';
    for (const [index, action] of intent.actions.entries()) await this.apply(action, `${intent.id}:action:${index}`, leaseValue);
    for (const [index, decision] of intent.decisions.entries()) await this.record(stored.rollout, intent, decision, index);
    return this.clear(stored, intent.id, leaseValue);
  }

  private async apply(action: RolloutAction, idempotencyKey: string, leaseValue: string): Promise<void> {
    // A predecessor that died after this action leaves its effect in place: not applied again.
    if (await this.inPlace(action)) return;
    await this.deps.holdLease(leaseValue);
    const { service } = this.deps;
    switch (action.kind) {
      case 'traffic':
        await service.setTraffic({ integrations: action.percentByIntegration }, autopilotActor, { idempotencyKey });
        return;
      case 'parallelism':
        await service.setParallelism({ [action.cluster]: action.maxParallelism }, autopilotActor, { idempotencyKey });
        return;
      case 'rollback':
        await service.rollback({ integration: action.integration, reason: action.reason }, autopilotActor, { idempotencyKey });
        return;
    }
  }

  private async inPlace(action: RolloutAction): Promise<boolean> {
    const { service } = this.deps;
    switch (action.kind) {
      case 'traffic': {
        const { flag } = await service.traffic();
        return Object.entries(action.percentByIntegration).every(([integration, percent]) => flag.integrations[integration]?.percent === percent);
      }
      case 'parallelism':
        return (await service.parallelism())[action.cluster] === action.maxParallelism;
      case 'rollback': {
        // In place once both the override routes it and Unleash keeps it: a rollback whose
        // Unleash write did not happen is rolled back again, as an operator would to retry it.
        const { flag, override } = await service.traffic();
        const routed = override !== null && (override.all || override.integrations.includes(action.integration));
        const durable = !flag.enabled || flag.integrations[action.integration]?.rolledBack === true;
        return routed && durable;
      }
    }
  }

  private record(rollout: Rollout, intent: PendingIntent, decision: Decision, index: number): Promise<void> {
    return this.deps.audit.recordOnce(
      {
        actor: decision.actor,
        action: 'rollout.decision',
        target: decision.integration ?? rollout.id,
        before: null,
        // The reading is the rollout's: it is not read again until the intent is cleared.
        after: {
          rollout: rollout.id,
          name: rollout.plan.name,
          kind: decision.kind,
          step: decision.step,
          status: intent.status,
          maxParallelism: intent.maxParallelism,
          reading: rollout.lastReading,
        },
        outcome: 'ok',
        reason: decision.message,
        idempotencyKey: `${intent.id}:decision:${index}`,
      },
      decision.atUnixMs,
    );
  }

  private async clear(stored: StoredRollout, intentId: string, leaseValue: string): Promise<'finished' | 'lost-lease'> {
    let current = stored;
    for (let attempt = 1; attempt <= maxClearAttempts; attempt++) {
      const written = await this.deps.store.write({ ...current.rollout, pending: null }, current.version, leaseValue);
      if (written === 'lost-lease') return 'lost-lease';
      if (written !== 'changed') return 'finished';
      // An operator's pause, resume or abort keeps the intent: cleared on top of theirs.
      const reread = await this.deps.store.current();
      if (reread?.rollout.pending?.id !== intentId) return 'finished';
      current = reread;
    }
    throw new Error(
      `autopilot: intent ${intentId} is done but the rollout kept changing under its clear (${maxClearAttempts} attempts); the next tick clears it`,
    );
  }
}
