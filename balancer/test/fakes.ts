import { EventEmitter } from 'node:events';
import { Registry } from 'prom-client';
import { silentLogger } from '@headroom/common';
import type { Reservation } from '@headroom/fleet';
import type { ExecuteRequest } from '@headroom/proto';
import { Admission, type AdmissionLedger, type AdmissionOptions, type SlotFreedSubscriber } from '../src/admission';
import type { WorkerCalls } from '../src/dispatch';
import { createBalancerMetrics } from '../src/metrics';
import type { SlotPolicy, SlotRequest } from '../src/policies';
import type { DispatchOutcome } from '../src/worker-channels';

/**
 * Fakes for unit tests of admission and dispatch, without Redis or gRPC (as grpc-js drives its
 * pickers with a fake helper). The properties across balancers are tested against real Redis.
 */

export interface ReleaseRecord {
  cluster: string;
  leaseId: string;
  workerId: string;
}

interface FakeWorker {
  address: string;
  free: number;
}

/** The pub/sub connection: the fake ledger announces freed slots on it. */
export class FakeSubscriber extends EventEmitter implements SlotFreedSubscriber {
  readonly channels: string[] = [];

  async subscribe(...channels: string[]): Promise<number> {
    this.channels.push(...channels);
    return channels.length;
  }
}

/**
 * The slot ledger and a least-loaded policy in memory: free slots per worker, leases, releases
 * (recorded with their kind), this balancer's waiting entries, and slot-freed announcements.
 */
export class FakeLedger implements AdmissionLedger, SlotPolicy {
  readonly name = 'least-loaded';
  readonly sharedCount = true;
  readonly releases: ReleaseRecord[] = [];
  readonly reserveRequests: { cluster: string; skipWorkerIds: readonly string[] }[] = [];
  /** The balancer's part in a lease ended (`SlotPolicy.finished`), by worker. */
  readonly finishedByWorker = new Map<string, number>();
  readonly stopWaitingCalls: { cluster: string; which: 'all' | 'user' }[] = [];
  /** When set, reservations wait for it before they answer (a reservation in flight). */
  reserveGate: Promise<void> | undefined;
  private readonly workers = new Map<string, Map<string, FakeWorker>>();
  private readonly leases = new Map<string, { cluster: string; workerId: string; integration: string }>();
  /** In-flight limits by integration (all clusters alike), as the ledger's integration limits; and the counts held. */
  readonly integrationLimits = new Map<string, number>();
  /** Of an integration's limit, the slots background tasks may not take (kept for user-present ones). */
  readonly keptForUserPresent = new Map<string, number>();
  /** Start rates by integration: while set, its reservations are refused at its rate, answering `retryAfterMs`. */
  readonly integrationsAtRate = new Map<string, { maxStartsPerSecond: number; retryAfterMs: number }>();
  private readonly inflightByIntegration = new Map<string, number>();
  private readonly waiting = new Set<string>();
  private leaseCount = 0;

  constructor(readonly subscriber = new FakeSubscriber()) {}

  addWorker(cluster: string, workerId: string, freeSlots: number): void {
    if (!this.workers.has(cluster)) this.workers.set(cluster, new Map());
    this.workers.get(cluster)!.set(workerId, { address: `${workerId}.test:1`, free: freeSlots });
  }

  freeSlots(cluster: string, workerId: string): number {
    return this.workers.get(cluster)?.get(workerId)?.free ?? 0;
  }

  /** A slot frees on its own (a task another balancer placed ended): announced as the real scripts do. */
  freeSlot(cluster: string, workerId: string): void {
    this.workers.get(cluster)!.get(workerId)!.free++;
    this.announce(cluster);
  }

  leasesHeld(): number {
    return this.leases.size;
  }

  keys(cluster: string): { slotFreedChannel: string } {
    return { slotFreedChannel: `slot-freed:${cluster}` };
  }

  async reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    this.reserveRequests.push({ cluster, skipWorkerIds: [...request.skipWorkerIds] });
    await this.reserveGate;
    const kept = request.priority === 'user' ? 0 : (this.keptForUserPresent.get(request.integration) ?? 0);
    const limit = this.integrationLimits.get(request.integration);
    if (limit !== undefined && (this.inflightByIntegration.get(request.integration) ?? 0) >= limit - kept) {
      if (request.waitIfNone) this.waiting.add(cluster);
      return { ok: false, reason: 'integration-at-limit', limit };
    }
    const atRate = this.integrationsAtRate.get(request.integration);
    if (atRate) {
      if (request.waitIfNone) this.waiting.add(cluster);
      return { ok: false, reason: 'integration-at-rate', ...atRate };
    }
    let best: [string, FakeWorker] | undefined;
    for (const entry of this.workers.get(cluster) ?? []) {
      if (request.skipWorkerIds.includes(entry[0]) || entry[1].free <= 0) continue;
      if (!best || entry[1].free > best[1].free) best = entry;
    }
    if (!best) {
      if (request.waitIfNone) this.waiting.add(cluster);
      return { ok: false, reason: 'full' };
    }
    const [workerId, worker] = best;
    const freeSlotsBefore = worker.free--;
    const leaseId = `lease-${++this.leaseCount}`;
    this.leases.set(leaseId, { cluster, workerId, integration: request.integration });
    this.inflightByIntegration.set(request.integration, (this.inflightByIntegration.get(request.integration) ?? 0) + 1);
    return { ok: true, leaseId, workerId, address: worker.address, freeSlotsBefore };
  }

  finished(_cluster: string, workerId: string): void {
    this.finishedByWorker.set(workerId, (this.finishedByWorker.get(workerId) ?? 0) + 1);
  }

  async release(cluster: string, leaseId: string): Promise<boolean> {
    const lease = this.leases.get(leaseId);
    this.releases.push({ cluster, leaseId, workerId: lease?.workerId ?? '?' });
    if (!lease) return false;
    this.leases.delete(leaseId);
    this.inflightByIntegration.set(lease.integration, (this.inflightByIntegration.get(lease.integration) ?? 0) - 1);
    this.workers.get(lease.cluster)!.get(lease.workerId)!.free++;
    this.announce(lease.cluster);
    return true;
  }

  async stopWaiting(cluster: string, _balancerId: string, which: 'all' | 'user'): Promise<void> {
    this.stopWaitingCalls.push({ cluster, which });
    if (which === 'all') this.waiting.delete(cluster);
  }

  async stillWaiting(cluster: string): Promise<void> {
    this.waiting.add(cluster);
  }

  private announce(cluster: string): void {
    if (this.waiting.has(cluster)) this.subscriber.emit('message', this.keys(cluster).slotFreedChannel, '1');
  }
}

/** An Admission over a fake ledger, started, closed after the test. */
export async function fakeAdmission(t: { after(fn: () => unknown): void }, ledger: FakeLedger, options: Partial<AdmissionOptions> = {}): Promise<Admission> {
  const admission = new Admission({
    ledger,
    policy: ledger,
    balancerId: 'balancer-1',
    clusters: ['baseline', 'candidate'],
    subscriber: ledger.subscriber,
    maxQueuedTasks: 100,
    maxQueuedBytes: 1_000_000,
    // Long: the tests free slots themselves, so a recheck would only blur the order they check.
    queueRecheckIntervalMs: 60_000,
    maxQueuedShareAtLimit: 0.5,
    logger: silentLogger,
    ...options,
  });
  await admission.start();
  t.after(() => admission.close());
  return admission;
}

export interface FakeCall {
  workerId: string;
  address: string;
  request: ExecuteRequest;
  signal: AbortSignal;
  /** The worker says the task started (the "started" header). */
  started(): void;
}

/** Worker calls answered by `behave`, each recorded; `onStartedOrEnded` runs as WorkerChannels runs it. */
export class FakeWorkers implements WorkerCalls {
  readonly calls: FakeCall[] = [];

  constructor(private readonly behave: (call: FakeCall) => DispatchOutcome | Promise<DispatchOutcome>) {}

  async execute(
    address: string,
    request: ExecuteRequest,
    _deadlineUnixMs: number,
    signal: AbortSignal,
    onStartedOrEnded?: () => void,
  ): Promise<DispatchOutcome> {
    const call: FakeCall = { workerId: request.workerId ?? '', address, request, signal, started: () => onStartedOrEnded?.() };
    this.calls.push(call);
    try {
      return await this.behave(call);
    } finally {
      onStartedOrEnded?.();
    }
  }
}

export function answered(workerId: string, result = 'ok'): DispatchOutcome {
  return { kind: 'done', response: { runMs: 7, queueWaitMs: 0, result: Buffer.from(result), workerId, outcome: 'result' } };
}

export function testMetrics() {
  const registry = new Registry();
  const metrics = createBalancerMetrics(
    registry,
    () => ({
      byCluster: {},
      queuedBytes: 0,
      shed: 0,
      refusedQueueFull: 0,
      refusedAtLimit: 0,
      refusedAtRate: 0,
      integrationMarksDropped: 0,
      handoffs: 0,
      maxQueued: 0,
      maxQueuedBytes: 0,
    }),
    () => ({ calls: 0, releases: 0, reservations: 0, waiting: 0, refused: 0, maxWaiting: 0 }),
  );
  return { registry, metrics };
}

/** A promise and its resolver, to hold a fake call or reservation open. */
export function deferred<T = void>(): { promise: Promise<T>; resolve(value: T): void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Lets every callback already due run (fake ledger calls resolve within a few turns). */
export function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 5));
}
