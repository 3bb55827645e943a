import type { Counter } from 'prom-client';
import type { Logger } from '@headroom/common';
import type { EjectionReason, UnreachableMark } from '@headroom/fleet';
import { checkHealth, type ChannelSecurity } from '@headroom/proto';
import { judgeOutcome, type FailureRate } from './failure-rate';
import type { DispatchOutcome } from './worker-channels';

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
  markUnreachable(cluster: string, workerId: string, forMs: number, maxMarkedShare: number, reason: EjectionReason): Promise<UnreachableMark>;
  /** Ends the mark this balancer made (ending at `markedUntilMs`), unless another balancer renewed it since ('kept'). */
  clearEjection(cluster: string, workerId: string, markedUntilMs: number): Promise<'cleared' | 'kept' | 'not-registered'>;
  checkHealth(address: string, timeoutMs: number): Promise<HealthCheckResult>;
  /** The worker's address now; undefined once it left the cluster. */
  addressOf(cluster: string, workerId: string): string | undefined;
  setTimer(run: () => void, delayMs: number): { cancel(): void };
  /** The clock the failure window reads (ms). */
  nowMs(): number;
}

/** How an ejected worker came back: a health check passed (unreachable ones), or its back-off ended (failing ones: a health check cannot see a handler's fault). */
export type ReturnedBy = 'probe' | 'backoff';

export interface EjectionDependencies {
  /** headroom_balancer_workers_ejected_total */
  ejected: Pick<Counter<'cluster' | 'reason'>, 'inc'>;
  /** headroom_balancer_workers_returned_total */
  returned: Pick<Counter<'cluster' | 'reason' | 'return'>, 'inc'>;
  /** Each worker's failures per integration against its peers': what ejects a worker that fails fast. */
  failureRate: FailureRate;
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
  /** Ejections since this worker last answered a task (unreachable) or last failed no more than its peers (failing): sets the next back-off. */
  ejectionsInARow: number;
  /** Why it is (or was last) ejected. */
  reason: EjectionReason;
  /** The end of its mark in the ledger, as this balancer's last mark answered (Redis's clock). */
  markedUntilMs: number;
  /** watching: counting failures; marking: the ledger call is under way; ejected: waiting for the back-off to end; checking: health check under way. */
  state: 'watching' | 'marking' | 'ejected' | 'checking';
  timer: { cancel(): void } | undefined;
}

/**
 * Outlier detection, shared through the ledger: a worker is marked there so that no balancer
 * reserves on it, for a back-off that doubles at each ejection in a row, for one of two reasons.
 *
 * - unreachable: `ejectAfterConnectFailures` failures to connect in a row (a worker that
 *   answers, even with a refusal or the task's own error, resets the count). When the back-off
 *   ends, a health check (the probe) decides whether it is back or marked again.
 * - failing: its failure share on an integration is far above its peers' on the same one
 *   (FailureRate), as a worker whose handlers throw at once is: it frees its slots fastest, so
 *   least-loaded routing would send it most of the work. A health check cannot see a handler's
 *   fault, so it comes back when the back-off ends and is judged again on what it does then.
 *
 * Both share `maxEjectedShare` (the ledger counts every mark) and the back-off.
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

  /** Workers this balancer holds marked now, and why. */
  ejectedWorkers(): { cluster: string; workerId: string; reason: EjectionReason }[] {
    return [...this.followed.values()].filter((f) => f.state !== 'watching').map(({ cluster, workerId, reason }) => ({ cluster, workerId, reason }));
  }

  /** How a dispatch to a worker ended, for the task's integration: what both kinds of ejection learn from. */
  dispatchEnded(cluster: string, workerId: string, address: string, integration: string, outcome: DispatchOutcome): void {
    // This balancer's own TLS or credentials failed: it says nothing of the worker (OwnTransportFaults reports it).
    if (outcome.kind === 'not-started' && outcome.ownFault) return;
    if (outcome.kind === 'not-started' && outcome.unreachable) return this.connectFailed(cluster, workerId, address, outcome.message);
    if (outcome.kind === 'done' || outcome.kind === 'not-started') this.answered(cluster, workerId);
    const judgement = judgeOutcome(outcome);
    if (judgement === undefined || this.closed) return;
    const known = this.followed.get(keyOf(cluster, workerId));
    const onProbation = known?.state === 'watching' && known.reason === 'failing' && known.ejectionsInARow > 0;
    const verdict = this.deps.failureRate.record(cluster, workerId, integration, judgement, this.helper.nowMs(), onProbation);
    if (verdict.kind === 'in-line' && judgement === 'success') this.performedWell(cluster, workerId);
    if (verdict.kind !== 'outlier') return;
    const followed = this.follow(cluster, workerId, address);
    if (!followed || followed.state !== 'watching') return;
    followed.address = address;
    followed.lastError = `${verdict.failures} of ${verdict.tasks} ${integration} tasks failed, ${verdict.peerFailures} of ${verdict.peerTasks} on the other workers`;
    void this.eject(followed, 'failing');
  }

  /** A dispatch to the worker could not connect (the task did not start). */
  connectFailed(cluster: string, workerId: string, address: string, error: string): void {
    if (this.closed || this.options.ejectAfterConnectFailures === 0) return;
    const followed = this.follow(cluster, workerId, address);
    if (!followed || followed.state !== 'watching') return;
    followed.address = address;
    followed.lastError = error;
    followed.consecutiveFailures++;
    if (followed.consecutiveFailures >= this.options.ejectAfterConnectFailures) void this.eject(followed, 'unreachable');
  }

  /** The worker answered a dispatch (a result, the task's error, or a refusal): it is reachable. */
  answered(cluster: string, workerId: string): void {
    const followed = this.followed.get(keyOf(cluster, workerId));
    // While marked, the health check decides (an answer may come from a call made before).
    if (followed?.state !== 'watching') return;
    // An answer says nothing of a worker that was failing: its failure rate decides (performedWell).
    if (followed.reason === 'failing' && followed.ejectionsInARow > 0) followed.consecutiveFailures = 0;
    else this.followed.delete(keyOf(cluster, workerId));
  }

  /** The worker failed no more than its peers over a full window: a later ejection starts from the first back-off. */
  private performedWell(cluster: string, workerId: string): void {
    const key = keyOf(cluster, workerId);
    if (this.followed.get(key)?.state === 'watching') this.followed.delete(key);
  }

  /** Stops following workers of `cluster` that left it. */
  forgetMissing(cluster: string, present: readonly { workerId: string }[]): void {
    const ids = new Set(present.map((w) => w.workerId));
    for (const [key, followed] of this.followed) {
      if (followed.cluster === cluster && !ids.has(followed.workerId)) this.forget(key);
    }
    // The failure window forgets them by itself within a window (it sweeps what saw no task).
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
    followed = {
      cluster,
      workerId,
      address,
      consecutiveFailures: 0,
      lastError: '',
      ejectionsInARow: 0,
      reason: 'unreachable',
      markedUntilMs: 0,
      state: 'watching',
      timer: undefined,
    };
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

  private async eject(followed: Followed, reason: EjectionReason): Promise<void> {
    const { cluster, workerId } = followed;
    followed.state = 'marking';
    // A worker ejected for one reason and then for the other starts its back-off again.
    if (followed.reason !== reason) followed.ejectionsInARow = 0;
    followed.reason = reason;
    const backoffMs = this.backoffMs(followed.ejectionsInARow);
    // The mark outlasts the back-off by the health check and the call that follows it, so the
    // worker is not tried between the two; if this balancer dies, the mark ends on its own.
    const markMs = backoffMs + 2 * this.options.healthCheckTimeoutMs;
    let mark: UnreachableMark;
    try {
      mark = await this.helper.markUnreachable(cluster, workerId, markMs, this.options.maxEjectedShare, reason);
    } catch (error) {
      if (!this.isCurrent(followed)) return;
      this.deps.logger.warn(
        { err: error, cluster, workerId, address: followed.address, reason },
        'could not mark a worker ejected in the ledger; counting its failures again',
      );
      return this.notEjected(followed);
    }
    if (!this.isCurrent(followed)) return;
    if (mark.result === 'not-registered') return this.forget(keyOf(cluster, workerId));
    if (mark.result === 'too-many') {
      this.deps.logger.warn(
        {
          cluster,
          workerId,
          address: followed.address,
          reason,
          lastError: followed.lastError,
          markedWorkers: mark.marked,
          workers: mark.workers,
          maxEjectedShare: this.options.maxEjectedShare,
        },
        `worker ${reason} but not ejected: as many workers of its cluster as maxEjectedShare allows are marked already`,
      );
      return this.notEjected(followed);
    }
    const again = followed.ejectionsInARow > 0;
    followed.markedUntilMs = mark.untilMs;
    followed.ejectionsInARow++;
    followed.state = 'ejected';
    this.ejections++;
    // Judged afresh when it comes back, not on what it did before.
    this.deps.failureRate.forgetWorker(cluster, workerId);
    this.deps.ejected.inc({ cluster, reason });
    this.deps.logger.warn(
      {
        cluster,
        workerId,
        address: followed.address,
        reason,
        consecutiveFailures: followed.consecutiveFailures,
        lastError: followed.lastError,
        backoffMs,
        ejectionsInARow: followed.ejectionsInARow,
      },
      ejectedMessage(reason, again),
    );
    followed.timer = this.helper.setTimer(() => void (reason === 'failing' ? this.backoffEnded(followed) : this.check(followed)), backoffMs);
  }

  /** A failing worker's back-off ended: it takes tasks again, and its failure rate decides anew. */
  private async backoffEnded(followed: Followed): Promise<void> {
    if (!this.isCurrent(followed)) return;
    followed.timer = undefined;
    followed.state = 'checking';
    if ((await this.clearMark(followed)) !== 'cleared') return;
    this.deps.returned.inc({ cluster: followed.cluster, reason: 'failing', return: 'backoff' });
    this.deps.logger.info(
      {
        cluster: followed.cluster,
        workerId: followed.workerId,
        address: followed.address,
        reason: 'failing',
        return: 'backoff',
        ejectionsInARow: followed.ejectionsInARow,
      },
      'ejected worker is back: its back-off ended (a failing worker is judged again by its failure rate; the next ejection in a row lasts twice as long)',
    );
    this.watchAgain(followed);
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
      return this.eject(followed, 'unreachable');
    }
    if ((await this.clearMark(followed)) !== 'cleared') return;
    this.deps.returned.inc({ cluster, reason: 'unreachable', return: 'probe' });
    this.deps.logger.info({ cluster, workerId, address, reason: 'unreachable', return: 'probe' }, 'ejected worker is back: its health check passed');
    this.watchAgain(followed);
  }

  /**
   * Ends this balancer's mark in the ledger. 'kept': another balancer renewed it since (it ends
   * it itself), so this one only watches again; 'gone': the worker left, or this balancer closed.
   */
  private async clearMark(followed: Followed): Promise<'cleared' | 'kept' | 'gone'> {
    const { cluster, workerId } = followed;
    try {
      const result = await this.helper.clearEjection(cluster, workerId, followed.markedUntilMs);
      if (result === 'not-registered') {
        this.forget(keyOf(cluster, workerId));
        return 'gone';
      }
      if (result === 'kept' && this.isCurrent(followed)) {
        this.deps.logger.debug({ cluster, workerId, reason: followed.reason }, 'ejection mark kept: another balancer renewed it, and ends it');
        this.watchAgain(followed);
        return 'kept';
      }
    } catch (error) {
      // The mark ends on its own shortly (it outlasts the back-off by little).
      this.deps.logger.debug({ err: error, cluster, workerId }, 'could not clear the ejection mark; it expires');
    }
    return this.isCurrent(followed) ? 'cleared' : 'gone';
  }

  /** The ledger did not take the mark: watch again, and for a failing worker count a fresh window (else every failure would ask again). */
  private notEjected(followed: Followed): void {
    if (followed.reason === 'failing') this.deps.failureRate.forgetWorker(followed.cluster, followed.workerId);
    this.watchAgain(followed);
  }

  private watchAgain(followed: Followed): void {
    followed.state = 'watching';
    followed.consecutiveFailures = 0;
  }
}

function ejectedMessage(reason: EjectionReason, again: boolean): string {
  if (reason === 'failing') {
    return again
      ? 'worker ejected again: back from its back-off, it still fails far more than the other workers on the same integration'
      : 'worker ejected: it fails far more than the other workers on the same integration; every balancer skips it until its back-off ends';
  }
  return again
    ? 'worker ejected again: its health check failed'
    : 'worker ejected: this balancer could not connect to it; every balancer skips it until a health check passes';
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
