import { performance } from 'node:perf_hooks';
import { isHeadroomError } from '@headroom/common';
import type { OverrideState, OverrideStore } from '@headroom/fleet';
import type { TrafficFlag } from './unleash/traffic-flag';

/** Every integration at once ("all"), or one integration by name. */
export type OverrideScope = string;
export const allIntegrations: OverrideScope = 'all';

export type DurableOutcome = { ok: true; durationMs: number } | { ok: false; durationMs: number; error: string };

/**
 * Makes Unleash agree with the instant override, one scope at a time and after the operator has
 * had the answer: the override in Redis is what routes now; Unleash is what survives a loss of
 * Redis data (the control plane rebuilds the override from it).
 *
 * A write reads the override when it runs and copies that scope's state (the flag's switch for
 * "all", the integration's strategy otherwise), so the writes of one scope are interchangeable:
 * whichever runs last leaves Unleash as the override is now, whatever order the changes came in.
 * That lets requests coalesce: at most one write per scope waits, so the writes waiting are
 * bounded by the integrations and a rollback is never refused for want of room.
 */
export class DurableOverride {
  private readonly waiting = new Map<OverrideScope, Promise<DurableOutcome>>();
  private running = 0;
  /** The newest override this control plane wrote: copied instead of Redis's when Redis lost it. */
  private latest: OverrideState | undefined;

  constructor(
    private readonly deps: {
      traffic: TrafficFlag;
      store: OverrideStore;
      /** Runs `write` in turn with the control plane's other Unleash changes (each reads, then writes). */
      inTurn<T>(write: () => Promise<T>): Promise<T>;
      /** Runs `write` holding the lock that serialises Unleash changes across control planes. */
      locked<T>(scope: OverrideScope, write: () => Promise<T>): Promise<T>;
    },
  ) {}

  /** Writes waiting or running now. */
  get pending(): number {
    return this.waiting.size + this.running;
  }

  /**
   * Resolves (never rejects) once Unleash holds `scope` as the override has it when the write
   * runs; `written` is the override the change just wrote.
   */
  sync(scope: OverrideScope, written: OverrideState): Promise<DurableOutcome> {
    if (!this.latest || written.version > this.latest.version) this.latest = written;
    const queued = this.waiting.get(scope);
    if (queued) return queued;
    const outcome = this.deps
      .inTurn(async () => {
        // Taken off the waiting list as it starts: a change made from now on needs a write of its own.
        this.waiting.delete(scope);
        this.running++;
        const startedAt = performance.now();
        try {
          await this.deps.locked(scope, () => this.write(scope));
          return { ok: true as const, durationMs: performance.now() - startedAt };
        } catch (error) {
          return { ok: false as const, durationMs: performance.now() - startedAt, error: messageOf(error) };
        } finally {
          this.running--;
        }
      })
      .catch((error: unknown) => ({ ok: false as const, durationMs: 0, error: messageOf(error) }));
    this.waiting.set(scope, outcome);
    return outcome;
  }

  private async write(scope: OverrideScope): Promise<void> {
    // Versions only grow, even across a loss of Redis data (a rebuilt override is newer than any
    // before it). When Redis holds none, or an older one than ours (it lost the write), ours is
    // copied: "nothing rolled back" would undo the record the override is rebuilt from.
    const stored = await this.deps.store.read();
    const override = stored && (!this.latest || stored.version >= this.latest.version) ? stored : this.latest;
    if (!override) return;
    if (scope === allIntegrations) await this.deps.traffic.setEnabled(!override.all);
    else await this.deps.traffic.setIntegrationRolledBack(scope, override.integrations.includes(scope));
  }
}

function messageOf(error: unknown): string {
  if (isHeadroomError(error)) return error.message;
  return error instanceof Error ? error.message : String(error);
}
