import type { Logger } from '@headroom/common';
import type { OwnFaultReason } from './connect-failures';
import type { DispatchOutcome } from './worker-channels';

export interface OwnTransportFaultsOptions {
  /** Calls in a row that fail on this balancer's own TLS or credentials before it reports not ready. */
  notReadyAfterFaultsInARow: number;
  /**
   * Not ready this long without a new own fault, it reports ready again, so that calls test it
   * anew: with every balancer not ready, no call would ever come to show a fixed worker side.
   */
  readyAgainAfterMs: number;
  /** At most one error log per reason in this time (the others are counted in the next one). */
  logIntervalMs: number;
}

export interface OwnTransportFaultsDependencies {
  /** headroom_balancer_transport_errors_total (a prom-client Counter) */
  errors: { inc(labels: { cluster: string; reason: OwnFaultReason }): void };
  logger: Logger;
  /** Told each time readiness changes, with the problem while there is one. */
  readinessChanged(problem: OwnTransportProblem | undefined): void;
  nowMs(): number;
  setTimer(run: () => void, delayMs: number): { cancel(): void };
}

/** Why this balancer reports not ready. */
export interface OwnTransportProblem {
  reason: OwnFaultReason;
  cluster: string;
  /** The worker address of the last failed call, and its error. */
  address: string;
  error: string;
  faultsInARow: number;
}

/**
 * Calls to workers that failed on this balancer's own side (connect-failures.ts): a missing
 * client certificate, a CA that does not sign the workers', credentials turned away. They eject
 * no worker (that would take capacity from every balancer for one balancer's bad setup); they
 * are counted, logged (rate-limited, with the worker's address and the cause), and while every
 * call fails so, the balancer reports not ready, so that clients and orchestrators leave it.
 * A call that reaches a worker makes it ready again.
 */
export class OwnTransportFaults {
  private faultsInARow = 0;
  private lastFaultMs = 0;
  private problem: OwnTransportProblem | undefined;
  private readyTimer: { cancel(): void } | undefined;
  private closed = false;
  // At most one entry per reason: bounded.
  private readonly lastLog = new Map<OwnFaultReason, { atMs: number; suppressed: number }>();

  constructor(
    private readonly options: OwnTransportFaultsOptions,
    private readonly deps: OwnTransportFaultsDependencies,
  ) {}

  /** Why the balancer is not ready now; undefined while it is. */
  get currentProblem(): OwnTransportProblem | undefined {
    return this.problem;
  }

  dispatchEnded(cluster: string, address: string, outcome: DispatchOutcome): void {
    if (this.closed) return;
    if (outcome.kind === 'not-started' && outcome.ownFault) return this.fault(cluster, address, outcome.ownFault, outcome.message);
    // Only an answer from a worker shows this side works: a worker found down, a deadline or a cancel say nothing.
    const reached = outcome.kind === 'done' || outcome.kind === 'lost' || (outcome.kind === 'not-started' && !outcome.unreachable);
    if (!reached) return;
    this.faultsInARow = 0;
    if (this.problem) this.becomeReady('a call reached a worker');
  }

  /** Stops the timer; readiness no longer changes. Idempotent. */
  close(): void {
    this.closed = true;
    this.readyTimer?.cancel();
    this.readyTimer = undefined;
  }

  private fault(cluster: string, address: string, reason: OwnFaultReason, error: string): void {
    this.deps.errors.inc({ cluster, reason });
    this.faultsInARow++;
    this.lastFaultMs = this.deps.nowMs();
    this.log(cluster, address, reason, error);
    if (this.problem) {
      this.problem = { reason, cluster, address, error, faultsInARow: this.faultsInARow };
      return;
    }
    if (this.faultsInARow < this.options.notReadyAfterFaultsInARow) return;
    this.problem = { reason, cluster, address, error, faultsInARow: this.faultsInARow };
    this.deps.logger.error(
      { ...this.problem, readyAgainAfterMs: this.options.readyAgainAfterMs },
      `balancer not ready: ${this.faultsInARow} calls in a row to workers failed on its own ${reason === 'tls' ? 'TLS setup (client certificate, CA or server name: see workerTls)' : 'credentials'}; no worker is ejected for it`,
    );
    this.deps.readinessChanged(this.problem);
    this.armReadyAgain(this.options.readyAgainAfterMs);
  }

  private armReadyAgain(delayMs: number): void {
    this.readyTimer = this.deps.setTimer(() => {
      this.readyTimer = undefined;
      if (this.closed || !this.problem) return;
      const quietMs = this.deps.nowMs() - this.lastFaultMs;
      if (quietMs >= this.options.readyAgainAfterMs)
        this.becomeReady(`no call failed on its own side in ${this.options.readyAgainAfterMs} ms; the next calls test it again`);
      else this.armReadyAgain(this.options.readyAgainAfterMs - quietMs);
    }, delayMs);
  }

  private becomeReady(why: string): void {
    const was = this.problem;
    this.problem = undefined;
    this.faultsInARow = 0;
    this.readyTimer?.cancel();
    this.readyTimer = undefined;
    this.deps.logger.info({ reason: was?.reason, cluster: was?.cluster }, `balancer ready again: ${why}`);
    this.deps.readinessChanged(undefined);
  }

  /** One error log per reason per logIntervalMs, naming the worker's address and the cause; the calls not logged are counted in the next. */
  private log(cluster: string, address: string, reason: OwnFaultReason, error: string): void {
    const nowMs = this.deps.nowMs();
    const last = this.lastLog.get(reason);
    if (last && nowMs - last.atMs < this.options.logIntervalMs) {
      last.suppressed++;
      return;
    }
    this.lastLog.set(reason, { atMs: nowMs, suppressed: 0 });
    this.deps.logger.error(
      { cluster, address, reason, error, notLoggedSinceLast: last?.suppressed ?? 0 },
      `a call to a worker failed on this balancer's own ${reason === 'tls' ? 'TLS (client certificate, CA or server name)' : 'credentials'}: the worker is not counted unreachable`,
    );
  }
}
