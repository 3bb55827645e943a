import type { Counter } from 'prom-client';
import type { Logger } from '@headroom/common';
import type { UnreachableMark } from '@headroom/fleet';
import { checkHealth, type ChannelSecurity } from '@headroom/proto';

export interface WorkerEjectionOptions {
  /** Consecutive failures to connect after which a worker is marked unreachable; 0 never marks. */
  ejectAfterConnectFailures: number;
  /** First back-off; doubled at each ejection in a row, up to maxEjectionBackoffMs. */
  ejectionBackoffMs: number;
  maxEjectionBackoffMs: number;
  healthCheckTimeoutMs: number;
  /** Most workers of a cluster marked at once, as a share of its workers (the ledger enforces it). */
  maxEjectedShare: number;
}

export type HealthCheckResult = { healthy: true } | { healthy: false; reason: string };

/**
 * What the ejection needs from the rest of the balancer, and nothing else: the ledger's mark,
 * a health check, the directory's view of addresses, and timers (tests drive them by hand).
 */
export interface EjectionHelper {
  markUnreachable(cluster: string, workerId: string, forMs: number, maxMarkedShare: number): Promise<UnreachableMark>;
  clearUnreachable(cluster: string, workerId: string): Promise<boolean>;
  checkHealth(address: string, timeoutMs: number): Promise<HealthCheckResult>;
  /** The worker's address now; undefined once it left the cluster. */
  addressOf(cluster: string, workerId: string): string | undefined;
  setTimer(run: () => void, delayMs: number): { cancel(): void };
}

export interface EjectionDependencies {
  /** headroom_balancer_workers_ejected_total */
  ejected: Pick<Counter<'cluster'>, 'inc'>;
  logger: Logger;
}

/** Workers followed at once (those with failures not yet cleared); more are not followed until some clear. */
export const maxFollowedWorkers = 10_000;

interface Followed {
  readonly cluster: string;
  readonly workerId: string;
  address: string;
  consecutiveFailures: number;
  lastError: string;
  /** Ejections since this worker last answered a task: sets the next back-off. */
  ejectionsInARow: number;
  /** watching: counting failures; marking: the ledger call is under way; ejected: waiting for the back-off to end; checking: health check under way. */
  state: 'watching' | 'marking' | 'ejected' | 'checking';
  timer: { cancel(): void } | undefined;
}

/**
 * Outlier detection for workers this balancer cannot connect to, shared through the ledger:
 * after `ejectAfterConnectFailures` failures in a row the worker is marked unreachable there,
 * so that no balancer reserves on it; when the back-off ends, a health check decides whether
 * it is back (the mark is cleared) or marked again for twice as long.
 *
 * Only failures to reach a worker count: a worker that answers, even with a refusal or the
 * task's own error, resets its count.
 */
export class WorkerEjection {
  private readonly followed = new Map<string, Followed>();
  private closed = false;
  private ejections = 0;

  constructor(
    private readonly options: WorkerEjectionOptions,
    private readonly helper: EjectionHelper,
    private readonly deps: EjectionDependencies,
  ) {}

  /** Ejections (first ones and renewed ones) since start. */
  get ejectionCount(): number {
    return this.ejections;
  }

  /** Workers this balancer holds marked unreachable now. */
  ejectedWorkers(): { cluster: string; workerId: string }[] {
    return [...this.followed.values()].filter((f) => f.state !== 'watching').map(({ cluster, workerId }) => ({ cluster, workerId }));
  }

  /** A dispatch to the worker could not connect (the task did not start). */
  connectFailed(cluster: string, workerId: string, address: string, error: string): void {
    if (this.closed || this.options.ejectAfterConnectFailures === 0) return;
    const followed = this.follow(cluster, workerId, address);
    if (!followed || followed.state !== 'watching') return;
    followed.address = address;
    followed.lastError = error;
    followed.consecutiveFailures++;
    if (followed.consecutiveFailures >= this.options.ejectAfterConnectFailures) void this.eject(followed);
  }

  /** The worker answered a dispatch (a result, the task's error, or a refusal): it is reachable. */
  answered(cluster: string, workerId: string): void {
    const key = keyOf(cluster, workerId);
    // While marked, the health check decides (an answer may come from a call made before).
    if (this.followed.get(key)?.state === 'watching') this.followed.delete(key);
  }

  /** Stops following workers of `cluster` that left it. */
  forgetMissing(cluster: string, present: readonly { workerId: string }[]): void {
    const ids = new Set(present.map((w) => w.workerId));
    for (const [key, followed] of this.followed) {
      if (followed.cluster === cluster && !ids.has(followed.workerId)) this.forget(key);
    }
  }

  /** Cancels every timer; marks already in the ledger end on their own. Idempotent. */
  close(): void {
    this.closed = true;
    for (const key of [...this.followed.keys()]) this.forget(key);
  }

  private follow(cluster: string, workerId: string, address: string): Followed | undefined {
    const key = keyOf(cluster, workerId);
    let followed = this.followed.get(key);
    if (followed) return followed;
    if (this.followed.size >= maxFollowedWorkers) {
      // Make room by dropping the oldest worker that is only being watched; never a marked one.
      const oldest = [...this.followed].find(([, f]) => f.state === 'watching');
      if (!oldest) return undefined;
      this.forget(oldest[0]);
    }
    followed = { cluster, workerId, address, consecutiveFailures: 0, lastError: '', ejectionsInARow: 0, state: 'watching', timer: undefined };
    this.followed.set(key, followed);
    return followed;
  }

  private forget(key: string): void {
    this.followed.get(key)?.timer?.cancel();
    this.followed.delete(key);
  }

  private isCurrent(followed: Followed): boolean {
    return !this.closed && this.followed.get(keyOf(followed.cluster, followed.workerId)) === followed;
  }

  private backoffMs(ejectionsInARow: number): number {
    return Math.min(this.options.maxEjectionBackoffMs, this.options.ejectionBackoffMs * 2 ** Math.min(ejectionsInARow, 30));
  }

  private async eject(followed: Followed): Promise<void> {
    const { cluster, workerId } = followed;
    followed.state = 'marking';
    const backoffMs = this.backoffMs(followed.ejectionsInARow);
    // The mark outlasts the back-off by the health check and the call that follows it, so the
    // worker is not tried between the two; if this balancer dies, the mark ends on its own.
    const markMs = backoffMs + 2 * this.options.healthCheckTimeoutMs;
    let mark: UnreachableMark;
    try {
      mark = await this.helper.markUnreachable(cluster, workerId, markMs, this.options.maxEjectedShare);
    } catch (error) {
      if (!this.isCurrent(followed)) return;
      this.deps.logger.warn({ err: error, cluster, workerId, address: followed.address }, 'could not mark an unreachable worker in the ledger; counting its failures again');
      this.watchAgain(followed);
      return;
    }
    if (!this.isCurrent(followed)) return;
    if (mark.result === 'not-registered') return this.forget(keyOf(cluster, workerId));
    if (mark.result === 'too-many') {
      this.deps.logger.warn(
        { cluster, workerId, address: followed.address, lastError: followed.lastError, markedWorkers: mark.marked, workers: mark.workers, maxEjectedShare: this.options.maxEjectedShare },
        'worker unreachable but not ejected: as many workers of its cluster as maxEjectedShare allows are marked already',
      );
      this.watchAgain(followed);
      return;
    }
    const again = followed.ejectionsInARow > 0;
    followed.ejectionsInARow++;
    followed.state = 'ejected';
    this.ejections++;
    this.deps.ejected.inc({ cluster });
    this.deps.logger.warn(
      { cluster, workerId, address: followed.address, consecutiveFailures: followed.consecutiveFailures, lastError: followed.lastError, backoffMs, ejectionsInARow: followed.ejectionsInARow },
      again ? 'worker ejected again: its health check failed' : 'worker ejected: this balancer could not connect to it; every balancer skips it until a health check passes',
    );
    followed.timer = this.helper.setTimer(() => void this.check(followed), backoffMs);
  }

  private async check(followed: Followed): Promise<void> {
    if (!this.isCurrent(followed)) return;
    const { cluster, workerId } = followed;
    followed.timer = undefined;
    followed.state = 'checking';
    const address = this.helper.addressOf(cluster, workerId);
    if (address === undefined) return this.forget(keyOf(cluster, workerId));
    followed.address = address;
    const result = await this.helper.checkHealth(address, this.options.healthCheckTimeoutMs);
    if (!this.isCurrent(followed)) return;
    if (!result.healthy) {
      followed.lastError = result.reason;
      return this.eject(followed);
    }
    try {
      if (!(await this.helper.clearUnreachable(cluster, workerId))) return this.forget(keyOf(cluster, workerId));
    } catch (error) {
      // The mark ends on its own shortly (it outlasts the back-off by little).
      this.deps.logger.debug({ err: error, cluster, workerId }, 'could not clear the unreachable mark; it expires');
    }
    if (!this.isCurrent(followed)) return;
    this.deps.logger.info({ cluster, workerId, address }, 'ejected worker is back: its health check passed');
    this.watchAgain(followed);
  }

  private watchAgain(followed: Followed): void {
    followed.state = 'watching';
    followed.consecutiveFailures = 0;
  }
}

/** Health check of a worker: grpc.health.v1 Check of headroom.v1.Worker must answer SERVING. */
export function workerHealthCheck(security: ChannelSecurity): (address: string, timeoutMs: number) => Promise<HealthCheckResult> {
  return async (address, timeoutMs) => {
    const answer = await checkHealth(address, security, 'headroom.v1.Worker', timeoutMs);
    if ('error' in answer) return { healthy: false, reason: answer.error };
    return answer.status === 'SERVING' ? { healthy: true } : { healthy: false, reason: `health status ${answer.status}` };
  };
}

/** Timers of the running process: unref()ed, so they never keep it alive. */
export function processTimer(run: () => void, delayMs: number): { cancel(): void } {
  const timer = setTimeout(run, delayMs);
  timer.unref();
  return { cancel: () => clearTimeout(timer) };
}

function keyOf(cluster: string, workerId: string): string {
  return `${cluster}\u0000${workerId}`;
}
