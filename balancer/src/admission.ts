import { performance } from 'node:perf_hooks';
import type { RedisConnection } from '@headroom/fleet';
import { HeadroomError, isHeadroomError, type Logger } from '@headroom/common';
import { ledgerErrorCodes, type Ledger, type LedgerPriority, type QueueDepth, type Reservation } from '@headroom/fleet';
import type { SlotPolicy } from './policies';
import { WaitQueue, type Waiter } from './wait-queue';
import { balancerErrorCodes, reroutedCode } from './errors';

/** Most reservations one pass over the queue asks for in one round trip. */
const maxReservationsPerRoundTrip = 16;

export interface AdmissionOptions {
  ledger: Ledger;
  policy: SlotPolicy;
  balancerId: string;
  clusters: readonly string[];
  /** A connection for pub/sub only (it is put in subscriber mode). */
  subscriber: RedisConnection;
  /** Tasks waiting for a slot on this balancer, all clusters together. */
  maxQueuedTasks: number;
  /** Payload bytes those tasks may hold, all together. */
  maxQueuedBytes: number;
  /** While tasks wait, try again this often even without news of a freed slot (missed messages, Redis restarts). */
  queueRecheckIntervalMs: number;
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

export type Granted = Extract<Reservation, { ok: true }>;

interface SlotWaiter extends Waiter {
  readonly cluster: string;
  readonly integration: string;
  readonly skipWorkerIds: readonly string[];
  resolve(reservation: Granted): void;
  reject(error: unknown): void;
}

interface ClusterQueue {
  readonly cluster: string;
  readonly waiters: WaitQueue<SlotWaiter>;
  /** Counts slot-freed messages, to catch one that arrived while a reservation was in flight. */
  wakeups: number;
  serving: boolean;
  serveAgain: boolean;
  /** This balancer is recorded in the ledger as waiting (for any task / for a user-present task). */
  registered: boolean;
  registeredUser: boolean;
  /** Reservations under way: one that fails records this balancer as waiting, so clearing must wait for them. */
  reservesInFlight: number;
  syncDeferred: boolean;
}

/**
 * Gets a task a slot: at once when one is free and no task of the same or higher priority
 * waits before it, else in this balancer's bounded queue until a slot frees (announced by
 * the ledger over pub/sub), the deadline passes, or the task is shed for a user-present one.
 */
export class Admission {
  private readonly queues = new Map<string, ClusterQueue>();
  private readonly queueByChannel = new Map<string, ClusterQueue>();
  private recheckTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private shedCount = 0;
  private queueFullCount = 0;
  private queuedBytes = 0;

  constructor(private readonly options: AdmissionOptions) {
    for (const cluster of options.clusters) {
      const queue: ClusterQueue = { cluster, waiters: new WaitQueue(), wakeups: 0, serving: false, serveAgain: false, registered: false, registeredUser: false, reservesInFlight: 0, syncDeferred: false };
      this.queues.set(cluster, queue);
      this.queueByChannel.set(options.ledger.keys(cluster).slotFreedChannel, queue);
    }
  }

  async start(): Promise<void> {
    this.options.subscriber.on('message', (channel: string) => {
      const queue = this.queueByChannel.get(channel);
      if (!queue) return;
      queue.wakeups++;
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
    return { queued: this.totalQueued(), queuedBytes: this.queuedBytes, byCluster, shed: this.shedCount, refusedQueueFull: this.queueFullCount };
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

  async acquire(cluster: string, request: AcquireRequest): Promise<{ reservation: Granted; queueWaitMs: number }> {
    const queue = this.queues.get(cluster);
    if (!queue) throw new HeadroomError(balancerErrorCodes.noRoute, `cluster ${JSON.stringify(cluster)} is not served by this balancer`);
    if (this.closed) throw shuttingDown();
    if (request.signal.aborted) throw cancelled();
    const startedAt = performance.now();
    const waitingAhead = request.priority === 'user' ? queue.waiters.userPresentCount : queue.waiters.size;
    const wakeupsBefore = queue.wakeups;
    if (waitingAhead === 0) {
      const reservation = await this.tryReserve(queue, request.priority, request.skipWorkerIds);
      if (reservation?.ok) {
        if (request.signal.aborted) {
          await this.giveBack(queue.cluster, reservation);
          throw cancelled();
        }
        return { reservation, queueWaitMs: performance.now() - startedAt };
      }
      if (request.signal.aborted) throw cancelled();
    }
    const reservation = await this.enqueue(queue, request, queue.wakeups !== wakeupsBefore);
    return { reservation, queueWaitMs: performance.now() - startedAt };
  }

  /** Rejects every waiting task and clears this balancer's waiting entries; further acquires fail. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.recheckTimer);
    for (const queue of this.queues.values()) {
      for (const waiter of queue.waiters.removeAll()) waiter.reject(shuttingDown());
      await this.syncRegistration(queue);
    }
  }

  /**
   * Takes the tasks waiting for `cluster` whose integration `moves` selects out of the queue:
   * their acquire() fails with the internal rerouted code, and the caller queues them again for
   * another cluster. Returns how many moved.
   */
  reroute(cluster: string, moves: (integration: string) => boolean): number {
    const queue = this.queues.get(cluster);
    if (!queue) return 0;
    const moved = queue.waiters.removeWhere((waiter) => moves(waiter.integration));
    for (const waiter of moved) waiter.reject(new HeadroomError(reroutedCode, `taken out of the queue of cluster ${cluster}`));
    if (moved.length > 0) void this.syncRegistration(queue);
    return moved.length;
  }

  private totalQueued(): number {
    let total = 0;
    for (const queue of this.queues.values()) total += queue.waiters.size;
    return total;
  }

  private enqueue(queue: ClusterQueue, request: AcquireRequest, slotFreedMeanwhile: boolean): Promise<Granted> {
    return new Promise<Granted>((resolve, reject) => {
      // close() may have run while this task's first reservation was under way.
      if (this.closed) return reject(shuttingDown());
      const full = () => this.totalQueued() >= this.options.maxQueuedTasks || this.queuedBytes + request.payloadBytes > this.options.maxQueuedBytes;
      // A user-present task takes the places of the newest background ones (bounded: each pass removes one).
      while (full() && this.makeRoomFor(request.priority));
      if (full()) {
        this.queueFullCount++;
        const which =
          this.totalQueued() >= this.options.maxQueuedTasks
            ? `${this.options.maxQueuedTasks} tasks already wait on this balancer (maxQueuedTasks)`
            : `the waiting tasks hold ${this.queuedBytes} payload bytes; ${request.payloadBytes} more would pass maxQueuedBytes (${this.options.maxQueuedBytes})`;
        return reject(new HeadroomError(balancerErrorCodes.queueFull, which, { retryAfterMs: 1000 }));
      }
      const msLeft = request.deadlineUnixMs - Date.now();
      const waiter: SlotWaiter = {
        cluster: queue.cluster,
        integration: request.integration,
        priority: request.priority,
        enqueuedAtMs: Date.now(),
        skipWorkerIds: request.skipWorkerIds,
        done: false,
        resolve: (reservation) => {
          cleanup();
          resolve(reservation);
        },
        reject: (error) => {
          cleanup();
          reject(error);
        },
      };
      const giveUp = (error: unknown) => {
        if (waiter.done) return;
        queue.waiters.remove(waiter);
        waiter.reject(error);
        void this.syncRegistration(queue);
      };
      const timer = setTimeout(
        () => giveUp(new HeadroomError(balancerErrorCodes.deadlineExceeded, `no free slot in cluster ${queue.cluster} before the deadline (waited ${Date.now() - waiter.enqueuedAtMs} ms)`)),
        Math.max(0, msLeft),
      );
      timer.unref();
      const onAbort = () => giveUp(cancelled());
      request.signal.addEventListener('abort', onAbort, { once: true });
      const cleanup = () => {
        clearTimeout(timer);
        request.signal.removeEventListener('abort', onAbort);
        this.queuedBytes -= request.payloadBytes;
      };
      queue.waiters.push(waiter);
      this.queuedBytes += request.payloadBytes;
      // A slot freed (and was announced) while our own reservation was in flight: look again.
      if (slotFreedMeanwhile || !queue.registered) void this.serveQueue(queue);
    });
  }

  /** When the queue is full, a user-present task takes the place of the newest background one. */
  private makeRoomFor(priority: LedgerPriority): boolean {
    if (priority !== 'user') return false;
    for (const queue of this.queues.values()) {
      const shed = queue.waiters.shedNewestBackground();
      if (shed) {
        this.shedCount++;
        shed.reject(new HeadroomError(balancerErrorCodes.shed, 'shed to make room for a user-present task; try again later', { retryAfterMs: 1000 }));
        return true;
      }
    }
    return false;
  }

  private async tryReserve(queue: ClusterQueue, priority: LedgerPriority, skipWorkerIds: readonly string[]): Promise<Reservation | undefined> {
    queue.reservesInFlight++;
    try {
      const reservation = await this.options.policy.reserve(queue.cluster, { priority, waitIfNone: true, skipWorkerIds });
      if (!reservation.ok) {
        queue.registered = true;
        if (priority === 'user') queue.registeredUser = true;
      }
      return reservation;
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
          const batch = queue.waiters.nextBatch(maxReservationsPerRoundTrip);
          if (batch.length === 0) break;
          // One pipelined round trip for the whole batch (ioredis sends them together).
          const results = await Promise.all(batch.map((waiter) => this.tryReserve(queue, waiter.priority, waiter.skipWorkerIds)));
          // Slots reserved for waiters without a skip list are interchangeable (same priority):
          // they go to the oldest of those still waiting (FIFO), whichever call got them.
          const shared: Granted[] = [];
          let sharedFailed = false;
          batch.forEach((waiter, i) => {
            if (waiter.skipWorkerIds.length > 0) return;
            const result = results[i];
            if (result?.ok) shared.push(result);
            else sharedFailed = true;
          });
          const unused: Granted[] = [];
          batch.forEach((waiter, i) => {
            const own = waiter.skipWorkerIds.length > 0 ? results[i] : undefined;
            const reservation = waiter.skipWorkerIds.length > 0 ? (own?.ok ? own : undefined) : waiter.done ? undefined : shared.shift();
            if (!reservation) return;
            if (waiter.done) return void unused.push(reservation);
            queue.waiters.remove(waiter);
            waiter.resolve(reservation);
          });
          // Their waiters timed out or were cancelled meanwhile: give the slots back.
          for (const reservation of [...unused, ...shared]) await this.giveBack(queue.cluster, reservation);
          // A waiter that must avoid some workers does not hold up the others; stop when a
          // waiter without such limits found no slot, or when nobody got one.
          if (sharedFailed || results.every((r) => !r?.ok)) break;
        }
      } while (queue.serveAgain);
    } catch (error) {
      this.options.logger.error({ err: error, cluster: queue.cluster }, 'serving the queue failed');
    } finally {
      queue.serving = false;
    }
    await this.syncRegistration(queue);
  }

  /** Returns a reservation that will not be used. */
  async giveBack(cluster: string, reservation: Granted): Promise<void> {
    await this.options.ledger.release(cluster, reservation.leaseId).catch(() => undefined);
    this.options.policy.finished(cluster, reservation.workerId);
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
      } else if (queue.waiters.userPresentCount === 0 && queue.registeredUser) {
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
        await this.options.ledger.stillWaiting(queue.cluster, this.options.balancerId, queue.waiters.userPresentCount > 0);
        queue.registered = true;
        queue.registeredUser ||= queue.waiters.userPresentCount > 0;
      } catch {
        // Redis is away; the next recheck tries again.
      }
      await this.serveQueue(queue);
    }
  }
}

function cancelled(): HeadroomError {
  return new HeadroomError(balancerErrorCodes.cancelled, 'the client cancelled the task');
}

function shuttingDown(): HeadroomError {
  return new HeadroomError(balancerErrorCodes.shuttingDown, 'the balancer is shutting down', { retryAfterMs: 100 });
}
