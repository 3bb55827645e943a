import { performance } from 'node:perf_hooks';
import type { Logger } from '@headroom/common';
import type { HeartbeatReply, Ledger, WorkerReports } from '@headroom/fleet';
import type { FlagClient } from '@headroom/flags';
import type { ParallelismGate } from './gate';
import type { WorkerMetrics } from './metrics';
import type { WorkerReporter } from './reporter';
import type { RunningTasks } from './running-tasks';
import type { SelfProtection } from './self-protection';

/** How long a worker's report lives in Redis: a few missed intervals, then a dead worker's goes away on its own. */
export const workerReportTtlMs = (reportIntervalMs: number) => Math.max(10_000, 3 * reportIntervalMs);

/** What HeartbeatLoop uses of the worker, and nothing more. */
export interface HeartbeatContext {
  readonly workerId: string;
  readonly cluster: string;
  /** host:port balancers dial. */
  readonly address: string;
  readonly ledger: Pick<Ledger, 'heartbeat' | 'ejectionReason'>;
  readonly reports: Pick<WorkerReports, 'publish' | 'remove'>;
  /** Adds up the tasks between two reports (ExecuteService feeds it); closed when the loop stops. */
  readonly reporter: Pick<WorkerReporter, 'next' | 'close'>;
  /** Its max parallelism is what the loop advertises and sets. */
  readonly gate: Pick<ParallelismGate, 'maxParallelism'>;
  readonly tasks: Pick<RunningTasks, 'heldLeaseIds'>;
  readonly protection: Pick<SelfProtection, 'enabled' | 'current' | 'capacity' | 'check'>;
  /** The max-parallelism flag, when it sets a value for the cluster, wins over the worker's own. */
  readonly flags?: Pick<FlagClient, 'maxParallelism' | 'onChange'> | undefined;
  readonly metrics: Pick<WorkerMetrics, 'ledgerRepairs'>;
  readonly logger: Logger;
  isDraining(): boolean;
  /** A heartbeat's reply said an operator asked this worker to drain. */
  drainRequested(): void;
  /** The report schedule's clock, ms. @default performance.now */
  nowMs?: () => number;
}

export interface HeartbeatSettings {
  heartbeatIntervalMs: number;
  reportIntervalMs: number;
  protectCheckIntervalMs: number;
  /** The worker's own max parallelism (the flag and self-protection may change what is advertised). */
  maxParallelism: number;
}

/**
 * The worker's heartbeat: tells the ledger its capacity, whether it drains and the leases it
 * holds, at the period the ledger asks for; carries the worker's report when one is due; and
 * sets the gate's max parallelism from the flag, the worker's own setting and self-protection,
 * advertising a change at once.
 */
export class HeartbeatLoop {
  private ownMaxParallelism: number;
  private failureCount = 0;
  private markedUnreachable = false;
  /** A heartbeat of this process got through: its address is in the ledger unless the ledger lost the worker (then written anyway). */
  private succeededOnce = false;
  // A large cluster spreads its heartbeats out (the ledger says by how much: LedgerOptions.workersAtFullHeartbeatRate).
  private scale = 1;
  private timer: NodeJS.Timeout | undefined;
  private protectionTimer: NodeJS.Timeout | undefined;
  private stopFollowingFlags: (() => void) | undefined;
  private stopped = false;
  private readonly nowMs: () => number;
  private nextReportAtMs: number;
  private readonly reportTtlMs: number;

  constructor(
    private readonly context: HeartbeatContext,
    private readonly settings: HeartbeatSettings,
  ) {
    this.ownMaxParallelism = settings.maxParallelism;
    this.nowMs = context.nowMs ?? (() => performance.now());
    this.nextReportAtMs = this.nowMs() + settings.reportIntervalMs;
    this.reportTtlMs = workerReportTtlMs(settings.reportIntervalMs);
  }

  /** Heartbeats that could not reach Redis, since start. */
  get failures(): number {
    return this.failureCount;
  }

  /** Between two heartbeats now: the interval, times the ledger's scale for a large cluster. */
  get periodMs(): number {
    return this.settings.heartbeatIntervalMs * this.scale;
  }

  /** Follows the flag and self-protection: a change is advertised at once rather than at the next heartbeat. */
  followChanges(): void {
    this.stopFollowingFlags = this.context.flags?.onChange(this.advertiseNow);
    // A stalling worker sheds new work within one check.
    if (this.context.protection.enabled) {
      this.protectionTimer = setInterval(() => this.checkProtection(), this.settings.protectCheckIntervalMs);
      this.protectionTimer.unref();
    }
  }

  /** Sends heartbeats, one period after the previous one ended, until `stop`. */
  start(): void {
    this.scheduleNext();
  }

  /** One heartbeat now (and another at once if it changed the max parallelism). */
  async beat(): Promise<void> {
    const { ledger, cluster, workerId, address, gate } = this.context;
    const reply = await ledger.heartbeat(cluster, {
      workerId,
      address,
      capacity: gate.maxParallelism,
      draining: this.context.isDraining(),
      heldLeaseIds: this.context.tasks.heldLeaseIds(),
      // A lease reserved on this worker reaches it within one of its periods, or it was not sent.
      dispatchGraceMs: this.periodMs,
      addressUnchanged: this.succeededOnce,
    });
    this.succeededOnce = true;
    this.scale = reply.heartbeatScale;
    this.noteRepairs(reply);
    if (reply.markedUnreachable !== this.markedUnreachable) {
      this.markedUnreachable = reply.markedUnreachable;
      if (this.markedUnreachable) void this.warnEjected();
      else this.context.logger.info({ address }, 'balancers send this worker tasks again');
    }
    if (this.applyMaxParallelism()) await this.beat();
    if (reply.drainRequested && !this.context.isDraining()) {
      this.context.logger.info('an operator asked this worker to drain');
      this.context.drainRequested();
    }
  }

  /** Sets the worker's own max parallelism and advertises what follows from it. */
  async setOwnMaxParallelism(maxParallelism: number): Promise<void> {
    this.ownMaxParallelism = maxParallelism;
    await this.beat();
  }

  /** Stops the heartbeats, following changes and the reporter. Idempotent. */
  stop(): void {
    this.stopFollowingFlags?.();
    clearInterval(this.protectionTimer);
    this.stopped = true;
    clearTimeout(this.timer);
    this.context.reporter.close();
  }

  /** Takes the worker's report out of Redis (it would expire). */
  async removeReport(): Promise<void> {
    await this.context.reports
      .remove(this.context.workerId)
      .catch((error: unknown) => this.context.logger.debug({ err: error }, 'could not remove the worker report; it expires'));
  }

  private scheduleNext(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      // The report rides with the heartbeat: sent in the same turn, both go to Redis in one
      // write on this connection (auto-pipelining), so Redis reads one request, not two.
      this.publishReportIfDue();
      this.beat()
        .catch((error: unknown) => {
          this.failureCount++;
          this.context.logger.warn({ err: error }, 'heartbeat failed');
        })
        .finally(() => this.scheduleNext());
    }, this.periodMs);
    this.timer.unref();
  }

  private publishReportIfDue(): void {
    if (this.nowMs() < this.nextReportAtMs) return;
    this.nextReportAtMs = this.nowMs() + this.settings.reportIntervalMs - this.settings.heartbeatIntervalMs / 2;
    const { reports, reporter, protection, workerId, logger } = this.context;
    reports
      .publish(workerId, { ...reporter.next(), selfProtection: protection.current }, this.reportTtlMs)
      .catch((error: unknown) => logger.debug({ err: error }, 'worker report failed'));
  }

  private noteRepairs(reply: HeartbeatReply): void {
    const { metrics, logger } = this.context;
    if (reply.leasesDropped > 0) metrics.ledgerRepairs.inc({ repair: 'dropped' }, reply.leasesDropped);
    if (reply.leasesRestored > 0) metrics.ledgerRepairs.inc({ repair: 'restored' }, reply.leasesRestored);
    if (reply.leasesDropped + reply.leasesRestored > 0)
      logger.debug({ dropped: reply.leasesDropped, restored: reply.leasesRestored }, "heartbeat put this worker's leases right in the ledger");
  }

  /** Says why balancers ejected this worker (read once per ejection: the heartbeat reply carries only the mark). */
  private async warnEjected(): Promise<void> {
    const { ledger, cluster, workerId, address, logger } = this.context;
    const reason = await ledger.ejectionReason(cluster, workerId).catch(() => null);
    if (reason === 'failing') {
      logger.warn(
        { address, reason },
        'balancers ejected this worker: its tasks fail far more than those of the other workers on the same integration; they send it no task until their back-off ends (check its handlers, their secrets and config)',
      );
    } else {
      logger.warn(
        { address, reason: 'unreachable' },
        'balancers cannot connect to this worker at the address it advertises: they send it no task until a health check passes (check advertiseHost and the network)',
      );
    }
  }

  /**
   * Sets the gate from the flag (else the worker's own setting), cut by self-protection; true if
   * it changed. Raising frees slots at once; lowering lets running tasks finish and admits no more until below.
   */
  private applyMaxParallelism(): boolean {
    const { flags, cluster, protection, gate, logger } = this.context;
    const flagged = flags?.maxParallelism(cluster);
    const wanted = protection.capacity(flagged ?? this.ownMaxParallelism);
    if (wanted === gate.maxParallelism) return false;
    const source = protection.current ? 'self-protection' : flagged === undefined ? 'own' : 'flag';
    logger.info({ from: gate.maxParallelism, to: wanted, source }, 'max parallelism changed');
    gate.maxParallelism = wanted;
    return true;
  }

  private readonly advertiseNow = (): void => {
    if (!this.context.isDraining() && this.applyMaxParallelism())
      this.beat().catch((error: unknown) => this.context.logger.warn({ err: error }, 'heartbeat failed'));
  };

  private checkProtection(): void {
    const { protection, logger } = this.context;
    const before = protection.current;
    if (!protection.check()) return;
    const now = protection.current;
    if (now && !before) logger.warn({ ...now }, 'self-protection: advertising fewer slots until the worker recovers');
    else if (!now) logger.info({ reason: before?.reason }, 'self-protection: recovered, advertising every slot');
    this.advertiseNow();
  }
}
