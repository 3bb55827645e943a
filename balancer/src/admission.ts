import { performance } from 'node:perf_hooks';
import { HeadroomError, isHeadroomError, type Logger } from '@headroom/common';
import {
  ledgerErrorCodes,
  maxWaitingAtLimitReported,
  type ClusterKeys,
  type IntegrationWaiting,
  type Ledger,
  type LedgerPriority,
  type QueueDepth,
} from '@headroom/fleet';
import type { SlotPolicy } from './policies';
import { Lease, type LeaseEnds } from './lease';
import { WaitQueue, type Waiter } from './wait-queue';
import { balancerErrorCodes } from './errors';
import { IntegrationShares } from './integration-shares';

/** Most reservations one pass over the queue asks for in one round trip. */
const maxReservationsPerRoundTrip = 16;

/** What admission asks of the slot ledger besides reservations (those go through the policy). */
export interface AdmissionLedger extends Pick<Ledger, 'release' | 'stopWaiting' | 'stillWaiting'> {
  keys(cluster: string): Pick<ClusterKeys, 'slotFreedChannel'>;
}

/** The pub/sub connection on which the ledger announces freed slots. */
export interface SlotFreedSubscriber {
  on(event: 'message', listener: (channel: string) => void): unknown;
  subscribe(...channels: string[]): Promise<unknown>;
}

export interface AdmissionOptions {
  ledger: AdmissionLedger;
  policy: SlotPolicy;
  balancerId: string;
  clusters: readonly string[];
  /** A connection for pub/sub only (it is put in subscriber mode). */
  subscriber: SlotFreedSubscriber;
  /** Tasks waiting for a slot on this balancer, all clusters together. */
  maxQueuedTasks: number;
  /** Payload bytes those tasks may hold, all together. */
  maxQueuedBytes: number;
  /** While tasks wait, try again this often even without news of a freed slot (missed messages, Redis restarts). */
  queueRecheckIntervalMs: number;
  /**
   * Share of maxQueuedTasks that the tasks of one integration at its in-flight limit may take;
   * beyond it they are refused (HR_ERR_INTEGRATION_AT_LIMIT), so that one slow integration
   * cannot fill the queue either.
   */
  maxQueuedShareAtLimit: number;
  logger: Logger;
}

export interface AcquireRequest {
  priority: LedgerPriority;
  /** The task's integration: a rollback moves waiting tasks by integration. */
  integration: string;
  deadlineUnixMs: number;
  skipWorkerIds: readonly string[];
  signal: AbortSignal;
  /** Memory the task holds while it waits (its payload). */
  payloadBytes: number;
}

export type Acquired =
  | { ok: true; lease: Lease; queueWaitMs: number }
  /** No slot for the task: `cluster` is the queue it was in at the end (a rollback may have moved it). */
  | { ok: false; error: HeadroomError; cluster: string };

/** One place in a cluster's queue. A task moved to another cluster leaves this one done and gets a new one there. */
interface SlotWaiter extends Waiter {
  readonly integration: string;
  readonly skipWorkerIds: readonly string[];
  readonly acquire: QueuedAcquire;
}

interface ClusterQueue {
  readonly cluster: string;
  readonly waiters: WaitQueue<SlotWaiter>;
  /** Counts slot-freed messages, to catch one that arrived while a reservation was in flight. */
  wakeups: number;
  /** Releases by this balancer while tasks waited here: each served the queue at once (Admission.release). */
  handoffs: number;
  serving: boolean;
  serveAgain: boolean;
  /** This balancer is recorded in the ledger as waiting (for any task / for a user-present task). */
  registered: boolean;
  registeredUser: boolean;
  /** Reservations under way: one that fails records this balancer as waiting, so clearing must wait for them. */
  reservesInFlight: number;
  syncDeferred: boolean;
  /** Serves the queue again when the first integration held at its start rate may start again (unref'd). */
  rateTimer: NodeJS.Timeout | undefined;
  rateTimerDueMs: number;
}

/**
 * Gets a task a slot: at once when one is free and no task of the same or higher priority
 * waits before it, else in this balancer's bounded queue until a slot frees (announced by
 * the ledger over pub/sub), the deadline passes, or the task is shed for a user-present one.
 */
export class Admission {
  private readonly queues = new Map<string, ClusterQueue>();
  private readonly queueByChannel = new Map<string, ClusterQueue>();
  private readonly leaseEnds: LeaseEnds;
  private recheckTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private shedCount = 0;
  private queueFullCount = 0;
  private queuedBytes = 0;
  private arrivals = 0;
  private readonly shares: IntegrationShares;

  constructor(private readonly options: AdmissionOptions) {
    this.shares = new IntegrationShares(Math.max(1, Math.floor(options.maxQueuedTasks * options.maxQueuedShareAtLimit)));
    this.leaseEnds = {
      // The unshared policies take no slot in the ledger: nothing to give back there.
      release: options.policy.sharedCount ? (cluster, leaseId) => this.release(cluster, leaseId) : async () => undefined,
      finished: (cluster, workerId) => options.policy.finished(cluster, workerId),
    };
    for (const cluster of options.clusters) {
      const queue: ClusterQueue = {
        cluster,
        waiters: new WaitQueue(),
        wakeups: 0,
        handoffs: 0,
        serving: false,
        serveAgain: false,
        registered: false,
        registeredUser: false,
        reservesInFlight: 0,
        syncDeferred: false,
        rateTimer: undefined,
        rateTimerDueMs: Infinity,
      };
      this.queues.set(cluster, queue);
      this.queueByChannel.set(options.ledger.keys(cluster).slotFreedChannel, queue);
    }
  }

  async start(): Promise<void> {
    this.options.subscriber.on('message', (channel: string) => {
      const queue = this.queueByChannel.get(channel);
      if (!queue) return;
      queue.wakeups++;
      this.shares.clear(queue.cluster);
      if (queue.waiters.size > 0) void this.serveQueue(queue);
    });
    await this.options.subscriber.subscribe(...this.queueByChannel.keys());
    const tick = () => {
      this.recheckTimer = setTimeout(() => {
        void this.recheck().finally(() => {
          if (!this.closed) tick();
        });
      }, this.options.queueRecheckIntervalMs);
      this.recheckTimer.unref();
    };
    tick();
  }

  stats() {
    const byCluster: Record<string, { userPresent: number; background: number }> = {};
    for (const queue of this.queues.values()) {
      byCluster[queue.cluster] = { userPresent: queue.waiters.userPresentCount, background: queue.waiters.backgroundCount };
    }
    let handoffs = 0;
    for (const queue of this.queues.values()) handoffs += queue.handoffs;
    return {
      queued: this.totalQueued(),
      queuedBytes: this.queuedBytes,
      byCluster,
      shed: this.shedCount,
      refusedQueueFull: this.queueFullCount,
      refusedAtLimit: this.shares.refusedAtLimit,
      refusedAtRate: this.shares.refusedAtRate,
      integrationMarksDropped: this.shares.marksDropped,
      handoffs,
    };
  }

  /** Tasks waiting for a slot, all clusters together, by priority. */
  queuedByPriority(): QueueDepth {
    let userPresent = 0;
    let background = 0;
    for (const queue of this.queues.values()) {
      userPresent += queue.waiters.userPresentCount;
      background += queue.waiters.backgroundCount;
    }
    return { userPresent, background };
  }

  /** Tasks waiting here because their integration is at its limit (or start rate), by cluster and integration (the busiest). */
  waitingAtLimit(): IntegrationWaiting[] {
    return this.shares.waitingAtLimit(maxWaitingAtLimitReported);
  }

  /**
   * A lease on a worker of `cluster`, or why there is none (deadline, queue full, shed,
   * cancelled, shutting down). While the task waits, a rollback may move it to another
   * cluster's queue (`reroute`): the lease, or the failure, then names that cluster.
   */
  async acquire(cluster: string, request: AcquireRequest): Promise<Acquired> {
    const queue = this.queues.get(cluster);
    if (!queue)
      return { ok: false, error: new HeadroomError(balancerErrorCodes.noRoute, `cluster ${JSON.stringify(cluster)} is not served by this balancer`), cluster };
    if (this.closed) return { ok: false, error: shuttingDown(), cluster };
    if (request.signal.aborted) return { ok: false, error: cancelled(), cluster };
    const startedAt = performance.now();
    // Tasks of integrations at their limit wait for their own integration: nobody waits behind them.
    const waitingAhead =
      request.priority === 'user'
        ? queue.waiters.userPresentCount - this.shares.queuedAtLimit(cluster, 'user')
        : queue.waiters.size - this.shares.queuedAtLimit(cluster, 'all');
    const wakeupsBefore = queue.wakeups;
    if (waitingAhead <= 0 && !this.shares.isAtLimit(cluster, request.integration, request.priority)) {
      const lease = await this.tryReserve(queue, request.priority, request.integration, request.skipWorkerIds);
      if (lease) {
        if (request.signal.aborted) {
          await lease.abandon();
          return { ok: false, error: cancelled(), cluster };
        }
        return { ok: true, lease, queueWaitMs: performance.now() - startedAt };
      }
      if (request.signal.aborted) return { ok: false, error: cancelled(), cluster };
    }
    return this.enqueue(queue, request, queue.wakeups !== wakeupsBefore, startedAt);
  }

  /**
   * Gives a slot back. When tasks wait here for the same cluster, their reservations are asked
   * for in the same turn, so they go to Redis in the same settle call, after the release (the
   * ledger batches both, releases first): the slot freed here is taken by a waiter here without
   * a round trip through the ledger's pub/sub announcement and back. The ledger still decides:
   * a user-present task waiting on another balancer keeps priority over a background one here,
   * and the freed slot is then announced to it.
   */
  private release(cluster: string, leaseId: string): Promise<unknown> {
    const released = this.options.ledger.release(cluster, leaseId);
    const queue = this.queues.get(cluster);
    if (queue && queue.waiters.size > 0 && !this.closed) {
      queue.handoffs++;
      this.shares.clear(cluster);
      void this.serveQueue(queue);
    }
    return released;
  }

  /** Fails every waiting task and clears this balancer's waiting entries; further acquires fail. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.recheckTimer);
    for (const queue of this.queues.values()) {
      clearTimeout(queue.rateTimer);
      for (const waiter of queue.waiters.removeAll()) waiter.acquire.fail(shuttingDown());
      await this.syncRegistration(queue);
    }
  }

  /**
   * Moves the tasks waiting for `fromCluster` whose integration `moves` selects into the queue
   * of `toCluster`, each in its place there by arrival; their acquire() goes on there. Workers
   * a task skipped in one cluster mean nothing in the other. Returns how many moved.
   */
  reroute(fromCluster: string, toCluster: string, moves: (integration: string) => boolean): number {
    const from = this.queues.get(fromCluster);
    const to = this.queues.get(toCluster);
    if (!from || !to || from === to) return 0;
    const moved = from.waiters.removeWhere((waiter) => moves(waiter.acquire.integration));
    if (moved.length === 0) return 0;
    to.waiters.insertInOrder(moved.map((waiter) => waiter.acquire.moveTo(to)));
    void this.syncRegistration(from);
    void this.serveQueue(to);
    return moved.length;
  }

  private totalQueued(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.waiters.size;
    return total;
  }

  private enqueue(queue: ClusterQueue, request: AcquireRequest, slotFreedMeanwhile: boolean, startedAt: number): Promise<Acquired> {
    return new Promise<Acquired>((resolve) => {
      // close() may have run while this task's first reservation was under way.
      if (this.closed) return resolve({ ok: false, error: shuttingDown(), cluster: queue.cluster });
      const full = () => this.totalQueued() >= this.options.maxQueuedTasks || this.queuedBytes + request.payloadBytes > this.options.maxQueuedBytes;
      // Checked before anything is shed for it: a task refused for its integration takes no one's place.
      if (this.shares.shareFull(queue.cluster, request.integration, request.priority)) {
        return resolve({ ok: false, error: this.refuseAtLimit(queue.cluster, request.integration), cluster: queue.cluster });
      }
      // A user-present task takes the places of the newest background ones (bounded: each pass removes one).
      while (full() && this.makeRoomFor(request.priority));
      if (full()) {
        this.queueFullCount++;
        const which =
          this.totalQueued() >= this.options.maxQueuedTasks
            ? `${this.options.maxQueuedTasks} tasks already wait on this balancer (maxQueuedTasks)`
            : `the waiting tasks hold ${this.queuedBytes} payload bytes; ${request.payloadBytes} more would pass maxQueuedBytes (${this.options.maxQueuedBytes})`;
        return resolve({ ok: false, error: new HeadroomError(balancerErrorCodes.queueFull, which, { retryAfterMs: 1000 }), cluster: queue.cluster });
      }
      const acquire = new QueuedAcquire(queue, request, this.arrivals++, startedAt, (result) => {
        clearTimeout(timer);
        request.signal.removeEventListener('abort', onAbort);
        this.queuedBytes -= request.payloadBytes;
        this.shares.removed(request.integration, request.priority);
        resolve(result);
      });
      const giveUp = (error: HeadroomError) => {
        if (acquire.entry.done) return;
        const current = acquire.queue;
        current.waiters.remove(acquire.entry);
        acquire.fail(error);
        void this.syncRegistration(current);
      };
      const timer = setTimeout(
        () =>
          giveUp(
            new HeadroomError(
              balancerErrorCodes.deadlineExceeded,
              `no free slot in cluster ${acquire.queue.cluster} before the deadline (waited ${Date.now() - acquire.enqueuedAtMs} ms)`,
            ),
          ),
        Math.max(0, request.deadlineUnixMs - Date.now()),
      );
      timer.unref();
      const onAbort = () => giveUp(cancelled());
      request.signal.addEventListener('abort', onAbort, { once: true });
      queue.waiters.push(acquire.entry);
      this.queuedBytes += request.payloadBytes;
      this.shares.added(request.integration, request.priority);
      // A slot freed (and was announced) while our own reservation was in flight: look again.
      if (slotFreedMeanwhile || !queue.registered) void this.serveQueue(queue);
    });
  }

  /** The error of a task whose integration is held (at its limit or rate) with its share of the queue full; counts it. */
  private refuseAtLimit(cluster: string, integration: string): HeadroomError {
    this.shares.refusedAtLimit++;
    const hold = this.shares.holdOf(cluster, integration);
    const waiting = `${this.shares.queuedOf(integration)} waiting here, its share of the queue (maxQueuedShareAtLimit)`;
    if (hold?.kind === 'rate') {
      this.shares.refusedAtRate++;
      // The queued tasks of the integration start at its rate: come back once they have.
      const retryAfterMs = Math.min(60_000, Math.max(100, Math.ceil((1000 * this.shares.queuedOf(integration)) / hold.maxStartsPerSecond)));
      const message = `integration ${integration} starts ${hold.maxStartsPerSecond} tasks per second in cluster ${cluster}, its limit (maxStartsPerSecond), and has ${waiting}`;
      return new HeadroomError(balancerErrorCodes.integrationAtLimit, message, { retryAfterMs });
    }
    const limit = hold?.kind === 'in-flight' ? hold.limit : undefined;
    const message = `integration ${integration} has ${limit} tasks in flight in cluster ${cluster}, its limit, and ${waiting}`;
    return new HeadroomError(balancerErrorCodes.integrationAtLimit, message, { retryAfterMs: 1000 });
  }

  /** When the queue is full, a user-present task takes the place of the newest background one. */
  private makeRoomFor(priority: LedgerPriority): boolean {
    if (priority !== 'user') return false;
    for (const queue of this.queues.values()) {
      const shed = queue.waiters.shedNewestBackground();
      if (shed) {
        this.shedCount++;
        shed.acquire.fail(new HeadroomError(balancerErrorCodes.shed, 'shed to make room for a user-present task; try again later', { retryAfterMs: 1000 }));
        return true;
      }
    }
    return false;
  }

  /**
   * A lease if a slot was free; else this balancer is recorded as waiting (or Redis is away). A
   * task whose integration is at its limit marks the integration so (see IntegrationShares), and
   * holds back no background work elsewhere (the ledger records no user-present waiter for it).
   */
  private async tryReserve(queue: ClusterQueue, priority: LedgerPriority, integration: string, skipWorkerIds: readonly string[]): Promise<Lease | undefined> {
    queue.reservesInFlight++;
    try {
      const reservation = await this.options.policy.reserve(queue.cluster, { priority, waitIfNone: true, skipWorkerIds, integration });
      if (!reservation.ok) {
        queue.registered = true;
        if (reservation.reason === 'integration-at-limit') this.shares.markAtLimit(queue.cluster, integration, reservation.limit, priority);
        else if (reservation.reason === 'integration-at-rate') {
          this.shares.markAtRate(queue.cluster, integration, reservation.maxStartsPerSecond, reservation.retryAfterMs, priority);
          this.serveWhenRateDue(queue);
        } else if (priority === 'user') queue.registeredUser = true;
        return undefined;
      }
      return new Lease(queue.cluster, reservation.leaseId, reservation.workerId, reservation.address, this.leaseEnds);
    } catch (error) {
      // Redis is away: the task waits in the queue and the recheck tries again.
      if (!isHeadroomError(error, ledgerErrorCodes.unavailable)) throw error;
      this.options.logger.debug({ err: error }, 'reservation failed; will retry');
      return undefined;
    } finally {
      if (--queue.reservesInFlight === 0 && queue.syncDeferred) {
        queue.syncDeferred = false;
        void this.syncRegistration(queue);
      }
    }
  }

  /**
   * Serves the queue again when the first integration held at its start rate may start again:
   * no news of a freed slot comes for a rate. One timer per cluster, for the earliest time.
   */
  private serveWhenRateDue(queue: ClusterQueue): void {
    const inMs = this.shares.msUntilRateDue(queue.cluster);
    if (inMs === undefined || this.closed) return;
    const dueMs = performance.now() + inMs;
    if (queue.rateTimer && queue.rateTimerDueMs <= dueMs) return;
    clearTimeout(queue.rateTimer);
    queue.rateTimerDueMs = dueMs;
    queue.rateTimer = setTimeout(() => {
      queue.rateTimer = undefined;
      queue.rateTimerDueMs = Infinity;
      if (queue.waiters.size > 0) void this.serveQueue(queue);
      // Another integration may be held until later.
      this.serveWhenRateDue(queue);
    }, Math.ceil(inMs));
    queue.rateTimer.unref();
  }

  /** Serves waiters in order while slots are free. One pass per cluster at a time. */
  private async serveQueue(queue: ClusterQueue): Promise<void> {
    if (queue.serving) {
      queue.serveAgain = true;
      return;
    }
    queue.serving = true;
    try {
      do {
        queue.serveAgain = false;
        for (;;) {
          // Waiters of integrations at their limit are passed over: they hold up nobody.
          const batch = queue.waiters.nextBatch(maxReservationsPerRoundTrip, (waiter) =>
            this.shares.isAtLimit(queue.cluster, waiter.integration, waiter.priority),
          );
          if (batch.length === 0) break;
          const markChangesBefore = this.shares.markChangesIn(queue.cluster);
          // One pipelined round trip for the whole batch (ioredis sends them together).
          const leases = await Promise.all(batch.map((waiter) => this.tryReserve(queue, waiter.priority, waiter.integration, waiter.skipWorkerIds)));
          const { sharedFailed, unused } = this.grantInOrder(queue, batch, leases);
          // Their waiters timed out, were cancelled or were moved to another cluster meanwhile.
          for (const lease of unused) await lease.abandon();
          // A waiter that must avoid some workers, or whose integration is at its limit, does not
          // hold up the others; stop when a waiter without such limits found no slot, or when
          // nobody got one and no integration newly reached its limit (the next batch passes it over).
          if (sharedFailed || (leases.every((lease) => !lease) && this.shares.markChangesIn(queue.cluster) === markChangesBefore)) break;
        }
      } while (queue.serveAgain);
    } catch (error) {
      this.options.logger.error({ err: error, cluster: queue.cluster }, 'serving the queue failed');
    } finally {
      queue.serving = false;
    }
    await this.syncRegistration(queue);
  }

  /**
   * Hands the leases of one batch to its waiters. Slots reserved for waiters without a skip list
   * are interchangeable within an integration (a lease counts for the integration it was taken
   * for): they go to the oldest of those still waiting (FIFO), whichever call got them. Returns
   * whether such a waiter found no slot for want of one (not for its integration's limit), and
   * the leases nobody could take.
   */
  private grantInOrder(queue: ClusterQueue, batch: readonly SlotWaiter[], leases: readonly (Lease | undefined)[]): { sharedFailed: boolean; unused: Lease[] } {
    const shared = new Map<string, Lease[]>();
    let sharedFailed = false;
    batch.forEach((waiter, i) => {
      if (waiter.skipWorkerIds.length > 0) return;
      const lease = leases[i];
      if (lease) shared.set(waiter.integration, [...(shared.get(waiter.integration) ?? []), lease]);
      else if (!this.shares.isAtLimit(queue.cluster, waiter.integration, waiter.priority)) sharedFailed = true;
    });
    const unused: Lease[] = [];
    batch.forEach((waiter, i) => {
      const lease = waiter.skipWorkerIds.length > 0 ? leases[i] : waiter.done ? undefined : shared.get(waiter.integration)?.shift();
      if (!lease) return;
      if (waiter.done) return void unused.push(lease);
      queue.waiters.remove(waiter);
      waiter.acquire.grant(lease);
    });
    for (const left of shared.values()) unused.push(...left);
    return { sharedFailed, unused };
  }

  /** Tells the ledger when this balancer no longer waits, so background work elsewhere may go on. */
  private async syncRegistration(queue: ClusterQueue): Promise<void> {
    if (queue.reservesInFlight > 0) {
      queue.syncDeferred = true;
      return;
    }
    try {
      if (queue.waiters.size === 0 && queue.registered) {
        queue.registered = queue.registeredUser = false;
        await this.options.ledger.stopWaiting(queue.cluster, this.options.balancerId, 'all');
      } else if (this.userPresentHoldingBack(queue) === 0 && queue.registeredUser) {
        queue.registeredUser = false;
        await this.options.ledger.stopWaiting(queue.cluster, this.options.balancerId, 'user');
      }
    } catch (error) {
      // The entries expire on their own (waiterTtlMs).
      this.options.logger.debug({ err: error }, 'could not clear waiting entry');
    }
  }

  private async recheck(): Promise<void> {
    for (const queue of this.queues.values()) {
      if (queue.waiters.size === 0) continue;
      try {
        const userPresent = this.userPresentHoldingBack(queue) > 0;
        await this.options.ledger.stillWaiting(queue.cluster, this.options.balancerId, userPresent);
        queue.registered = true;
        queue.registeredUser ||= userPresent;
      } catch {
        // Redis is away; the next recheck tries again.
      }
      this.shares.clear(queue.cluster);
      await this.serveQueue(queue);
    }
  }

  /** User-present tasks waiting here for a free slot, not for their integration's limit: those hold background work back fleet-wide. */
  private userPresentHoldingBack(queue: ClusterQueue): number {
    return queue.waiters.userPresentCount - this.shares.queuedAtLimit(queue.cluster, 'user');
  }
}

function cancelled(): HeadroomError {
  return new HeadroomError(balancerErrorCodes.cancelled, 'the client cancelled the task');
}

function shuttingDown(): HeadroomError {
  return new HeadroomError(balancerErrorCodes.shuttingDown, 'the balancer is shutting down', { retryAfterMs: 100 });
}

/** An acquire() waiting in a queue. A rollback may move it to another cluster's queue, as a new entry there. */
class QueuedAcquire {
  entry: SlotWaiter;
  readonly enqueuedAtMs = Date.now();
  private settled = false;

  constructor(
    public queue: ClusterQueue,
    private readonly request: AcquireRequest,
    private readonly arrival: number,
    private readonly startedAt: number,
    private readonly onSettled: (result: Acquired) => void,
  ) {
    this.entry = this.entryIn(request.skipWorkerIds);
  }

  get integration(): string {
    return this.request.integration;
  }

  /** Its entry in `queue`, which it waits in from now on; the caller has taken the old entry out. */
  moveTo(queue: ClusterQueue): SlotWaiter {
    this.queue = queue;
    this.entry = this.entryIn([]);
    return this.entry;
  }

  grant(lease: Lease): void {
    this.settle({ ok: true, lease, queueWaitMs: performance.now() - this.startedAt });
  }

  fail(error: HeadroomError): void {
    this.settle({ ok: false, error, cluster: this.queue.cluster });
  }

  private entryIn(skipWorkerIds: readonly string[]): SlotWaiter {
    return { priority: this.request.priority, integration: this.request.integration, arrival: this.arrival, skipWorkerIds, acquire: this, done: false };
  }

  private settle(result: Acquired): void {
    if (this.settled) return;
    this.settled = true;
    this.onSettled(result);
  }
}
