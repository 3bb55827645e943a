import * as assert from 'node:assert/strict';
import { clusterKeys, Ledger, type ClusterKeys, type LedgerOptions, type LedgerPriority, type RedisConnection, type Reservation } from '@headroom/fleet';
import { uniquePrefix } from '../redis';
import { deleteKeysUnder } from '../redis-server';
import { RedisClock } from './clock';
import { ExpectedLedger, workerOfLease, type ExpectedReservation } from './expected-ledger';
import { FleetWorld, type DispatchOutcome, type GiveUpReason, type HeartbeatSent, type ModelWorker, type TaskEnd } from './fleet-world';

/** What becomes of one release in a balancer's batch. */
export type ReleaseFate = 'arrives' | 'lost' | 'duplicated';

export interface LedgerModelConnections {
  /** One per balancer: each sends its own batches. */
  balancers: readonly RedisConnection[];
  /** The workers' heartbeats and own releases. */
  workers: RedisConnection;
  /** The model's: Redis's clock, snapshots, and a look at one record when timing cannot tell. */
  observer: RedisConnection;
}

export interface LedgerModelTiming {
  /** HeartbeatInput.dispatchGraceMs of every worker (their heartbeat period). */
  dispatchGraceMs: number;
  /** The sweep's heartbeatTimeoutMs. */
  sweepAfterMs: number;
}

/** What the runs did, to see that they cover every path (by event), and how often the model could not tell from Redis's clock alone and read the outcome instead (undecided). */
export interface LedgerModelStats {
  runs: number;
  events: Record<string, number>;
}

const cluster = 'c';
const keptForUserPresentShare = 0.1;
/**
 * Small enough to bind in the model's small clusters: the limit is checked along with the rest.
 * The start rate binds in the busier runs (a burst of 4, then one start per 250 ms per integration).
 */
const integrationLimit = { shareOfCapacity: 0.5, minInFlight: 2, maxStartsPerSecond: 4 };
/** A reservation's integration follows its priority: two integrations, each counted on its own. */
const integrationOf = (priority: LedgerPriority) => (priority === 'user' ? 'bank-u' : 'bank-b');

/**
 * One run of the model against the real ledger: each step is done on Redis and in the model
 * (FleetWorld: what the fleet truly does; ExpectedLedger: what the ledger must hold), and the
 * two are compared after every call to Redis. `checkpoint()` checks the bound in docs/ledger.md.
 */
export class LedgerModelRun {
  readonly trace: string[] = [];
  private readonly clock: RedisClock;
  private readonly keys: ClusterKeys;
  private readonly ledgerOptions: LedgerOptions;
  private readonly balancerLedgers: Ledger[];
  private readonly workerLedger: Ledger;

  private constructor(
    readonly fleet: FleetWorld,
    private readonly expected: ExpectedLedger,
    private readonly connections: LedgerModelConnections,
    private readonly timing: LedgerModelTiming,
    readonly stats: LedgerModelStats,
  ) {
    this.ledgerOptions = { keyPrefix: uniquePrefix('ledger-model'), keptForUserPresentShare, batchWindowMs: 0, defaultIntegrationLimit: integrationLimit };
    this.keys = clusterKeys(this.ledgerOptions.keyPrefix!, cluster);
    this.clock = new RedisClock(connections.observer);
    this.balancerLedgers = fleet.balancers.map((_, b) => new Ledger(connections.balancers[b]!, this.ledgerOptions));
    this.workerLedger = new Ledger(connections.workers, this.ledgerOptions);
  }

  /** A fleet of workers of these capacities and `balancerCount` balancers, on a key prefix of its own (`start()` registers the workers). */
  static create(
    connections: LedgerModelConnections,
    timing: LedgerModelTiming,
    stats: LedgerModelStats,
    capacities: readonly number[],
    balancerCount: number,
  ): LedgerModelRun {
    const fleet = new FleetWorld(capacities, balancerCount);
    const expected = new ExpectedLedger({ keptForUserPresentShare, integrationLimit, ...timing });
    return new LedgerModelRun(fleet, expected, connections, timing, stats);
  }

  /** Every worker registers with its first heartbeat, as a worker does when it starts. */
  async start(): Promise<void> {
    const capacities = this.fleet.workers.map((w) => w.capacity);
    this.note(
      `${capacities.length} workers of ${capacities.join(', ')} slots, ${this.fleet.balancers.length} balancer(s), dispatch grace ${this.timing.dispatchGraceMs} ms, sweep after ${this.timing.sweepAfterMs} ms`,
    );
    for (const worker of this.fleet.workers) await this.heartbeat(worker, false);
  }

  /** Deletes the run's keys. */
  async close(): Promise<void> {
    await deleteKeysUnder(this.connections.observer, this.ledgerOptions.keyPrefix!);
  }

  note(line: string): void {
    this.trace.push(line);
  }

  private count(event: string, times = 1): void {
    if (times > 0) this.stats.events[event] = (this.stats.events[event] ?? 0) + times;
  }

  /**
   * Balancer `b`'s batch window closes: its first releases go out (or are lost, or go out and
   * again later) with new reservations, in one call to Redis.
   */
  async sendBatch(b: number, fates: readonly ReleaseFate[], priorities: readonly LedgerPriority[]): Promise<void> {
    const outbox = this.fleet.balancers[b]!.outbox;
    const releases = outbox.splice(0, fates.length).map((leaseId, i) => ({ leaseId, fate: fates[i]! }));
    const sent = releases.filter((r) => r.fate !== 'lost');
    for (const r of sent) if (r.fate === 'duplicated') outbox.push(r.leaseId);
    const ledger = this.balancerLedgers[b]!;
    // Asked in one turn of the event loop: one settle call, releases first (ledger-batcher.ts).
    const { value, span } = await this.clock.span(() =>
      Promise.all([
        Promise.all(sent.map((r) => ledger.release(cluster, r.leaseId))),
        Promise.all(
          priorities.map((priority) => ledger.reserve(cluster, { priority, balancerId: `b${b}`, waitIfNone: false, integration: integrationOf(priority) })),
        ),
      ]),
    );
    const [released, reservations] = value;
    // The model takes the batch as the script does: the releases, then each reservation in turn.
    const wantReleased = sent.map((r) => this.expected.release(r.leaseId));
    const said = releases.map((r) => `release ${this.fleet.nameOf(r.leaseId)} ${r.fate}`);
    for (const r of releases) this.count(`balancer's release ${r.fate}`);
    const wantReservations = reservations.map((got, i) => {
      const integration = integrationOf(priorities[i]!);
      const want = this.expected.reservation(priorities[i]!, integration, span);
      this.count(`reserve ${priorities[i]}: ${got.ok ? 'ok' : got.reason}`);
      if (want.orAtRate) this.count('undecided rate');
      // Past the in-flight limit (by the model, and by the ledger's answer: a mismatch is reported below), settle checked the rate.
      if (!(!want.ok && want.reason === 'integration-at-limit') && !(!got.ok && got.reason === 'integration-at-limit')) {
        try {
          this.expected.rateAnswered(integration, priorities[i]!, span, !got.ok && got.reason === 'integration-at-rate', got.ok);
        } catch (error) {
          this.fail(error instanceof Error ? error.message : String(error));
        }
      }
      if (!got.ok) {
        said.push(`reserve ${priorities[i]}: none (${got.reason})`);
      } else if (this.expected.workers.has(got.workerId)) {
        this.expected.reserve(got.workerId, got.leaseId, span);
        said.push(`reserve ${priorities[i]}: ${this.fleet.reserved(b, got.leaseId)} on ${got.workerId}`);
      }
      return want;
    });
    this.note(`b${b} sends its batch: ${said.join('; ')}`);
    sent.forEach((r, i) => this.expect(released[i], wantReleased[i], `b${b}'s release of ${this.fleet.nameOf(r.leaseId)} said whether it was still counted`));
    reservations.forEach((got, i) => this.compareReservation(got, wantReservations[i]!, priorities[i]!));
    await this.compareWithLedger();
  }

  dispatch(b: number, leaseId: string, outcome: DispatchOutcome): void {
    const workerId = workerOfLease(leaseId);
    this.count(`dispatch: ${outcome}`);
    this.note(`b${b} dispatches ${this.fleet.nameOf(leaseId)} to ${workerId}, ${outcome}: ${this.fleet.dispatch(b, leaseId, outcome, workerId)}`);
  }

  giveUp(worker: ModelWorker, leaseId: string, reason: GiveUpReason): void {
    this.count(reason);
    this.fleet.giveUp(worker.id, leaseId);
    this.note(`${this.fleet.nameOf(leaseId)} on ${worker.id}: ${reason}, the balancer leaves it to the worker`);
  }

  taskEnds(worker: ModelWorker, leaseId: string, how: TaskEnd): void {
    this.count(worker.held.get(leaseId)!.answerTo === 'worker' ? 'task ends, left to its worker' : `task ends: ${how}`);
    this.note(`${this.fleet.nameOf(leaseId)} ends on ${worker.id} (${how}): ${this.fleet.taskEnds(worker.id, leaseId, how)}`);
  }

  /** The worker's own release (of a task whose balancer left it) goes through, or is lost; then it lets the lease go. */
  async workerRelease(worker: ModelWorker, leaseId: string, arrives: boolean): Promise<void> {
    this.count(`worker's release ${arrives ? 'arrives' : 'lost'}`);
    this.note(`${worker.id}'s release of ${this.fleet.nameOf(leaseId)} ${arrives ? 'arrives' : 'is lost'}`);
    if (arrives)
      this.expect(
        await this.workerLedger.release(cluster, leaseId),
        this.expected.release(leaseId),
        `${worker.id}'s release of ${this.fleet.nameOf(leaseId)} said whether it was still counted`,
      );
    this.fleet.workerReleased(worker.id, leaseId);
    if (arrives) await this.compareWithLedger();
  }

  killBalancer(b: number): void {
    this.count('balancer dies');
    this.note(`b${b} dies (${this.fleet.killBalancer(b)}); a new one takes its place`);
    this.balancerLedgers[b] = new Ledger(this.connections.balancers[b]!, this.ledgerOptions);
  }

  killWorker(worker: ModelWorker): void {
    this.count('worker dies');
    this.note(`${worker.id} dies, with [${[...worker.held.keys()].map((id) => this.fleet.nameOf(id)).join(', ')}]`);
    this.fleet.killWorker(worker.id);
  }

  async restartWorker(worker: ModelWorker, capacity: number): Promise<void> {
    this.count('worker restarts');
    this.note(`${worker.id} starts again with ${capacity} slots`);
    this.fleet.restartWorker(worker.id, capacity);
    await this.heartbeat(worker, false);
  }

  /**
   * The worker's heartbeat: one on its way arrives; else one is sent, to arrive now or (held
   * back: `later`) after whatever comes next, as a heartbeat on one connection can arrive after
   * releases sent on another after it.
   */
  async heartbeat(worker: ModelWorker, later: boolean): Promise<void> {
    const onItsWay = worker.heartbeatOnItsWay;
    worker.heartbeatOnItsWay = undefined;
    if (onItsWay) return this.heartbeatArrives(worker, onItsWay, 'sent earlier');
    const sent = this.fleet.heartbeatToSend(worker);
    if (!later) return this.heartbeatArrives(worker, sent, 'sent now');
    worker.heartbeatOnItsWay = sent;
    this.count('heartbeat slow on its way');
    this.note(`${worker.id} sends a heartbeat holding [${this.names(sent.heldLeaseIds)}]; it is slow on its way`);
  }

  /** One dispatch grace passes: every lease reserved so far is then old enough for a heartbeat to drop it. */
  async elapse(): Promise<void> {
    await this.clock.waitUntil((await this.clock.nowMs()) + this.timing.dispatchGraceMs);
    this.count('elapse');
    this.note(`${this.timing.dispatchGraceMs} ms pass`);
  }

  async sweep(): Promise<void> {
    const { value, span } = await this.clock.span(() => this.balancerLedgers[0]!.sweep(cluster, this.timing.sweepAfterMs));
    const verdicts = this.expected.sweepVerdicts(span);
    const removed = [...verdicts.removed];
    for (const workerId of verdicts.undecided) {
      this.count('undecided sweep');
      if ((await this.connections.observer.hexists(this.keys.workers, workerId)) === 0) removed.push(workerId);
    }
    for (const workerId of removed) this.expected.remove(workerId);
    this.count('worker swept', removed.length);
    this.note(`sweep: removes [${removed.join(', ')}]`);
    this.expect(value.workersRemoved, removed.length, 'workers the sweep removed');
    await this.compareWithLedger();
  }

  /**
   * The bound (docs/ledger.md): a slot lost for any reason is back at its worker's first heartbeat that
   * comes one dispatch grace after the reservation and after the worker let the task go. So:
   * the grace passes (and the dead workers' sweep timeout), the sweep runs, every live worker
   * heartbeats; then every live worker's free slots are its capacity minus what it truly runs,
   * the dead are gone, and the totals add up. Tasks keep running through it.
   */
  async checkpoint(): Promise<void> {
    this.count('checkpoint');
    let untilMs = (await this.clock.nowMs()) + this.timing.dispatchGraceMs;
    for (const worker of this.fleet.workers) {
      const registered = this.expected.workers.get(worker.id);
      if (!worker.alive && registered) untilMs = Math.max(untilMs, registered.lastHeartbeat.toMs + this.timing.sweepAfterMs);
    }
    await this.clock.waitUntil(untilMs);
    this.note("checkpoint: the grace and the dead workers' timeout pass");
    await this.sweep();
    for (const worker of this.fleet.workers.filter((w) => w.alive)) {
      if (worker.heartbeatOnItsWay) await this.heartbeat(worker, false);
      await this.heartbeat(worker, false);
    }
    await this.checkTheBound();
  }

  private async checkTheBound(): Promise<void> {
    const snapshot = await this.workerLedger.snapshot(cluster);
    const alive = this.fleet.workers.filter((w) => w.alive);
    const got = snapshot.workers.map((w) => `${w.workerId}: ${w.freeSlots} of ${w.capacity} free`);
    const want = alive.map((w) => `${w.id}: ${w.capacity - w.held.size} of ${w.capacity} free`);
    const gotTotals = `capacity ${snapshot.totalCapacity}, free ${snapshot.totalFree}`;
    const wantTotals = `capacity ${sum(alive.map((w) => w.capacity))}, free ${sum(alive.map((w) => Math.max(0, w.capacity - w.held.size)))}`;
    const runs = alive.map((w) => `${w.id} runs [${this.names([...w.held.keys()])}]`).join('; ');
    if (got.join('; ') !== want.join('; ') || gotTotals !== wantTotals) {
      this.fail(
        `the bound has passed, yet the ledger does not count what the workers run:\n  ledger: ${got.join('; ')}; ${gotTotals}\n  truth:  ${want.join('; ')}; ${wantTotals}\n  (${runs})`,
      );
    }
    this.note(`checkpoint holds: ${runs}`);
  }

  private async heartbeatArrives(worker: ModelWorker, sent: HeartbeatSent, when: string): Promise<void> {
    const { value: reply, span } = await this.clock.span(() =>
      this.workerLedger.heartbeat(cluster, {
        workerId: worker.id,
        address: worker.address,
        capacity: sent.capacity,
        draining: false,
        heldLeaseIds: sent.heldLeaseIds,
        dispatchGraceMs: this.timing.dispatchGraceMs,
        addressUnchanged: worker.heartbeatSucceeded,
      }),
    );
    worker.heartbeatSucceeded = true;
    const verdicts = this.expected.heartbeatVerdicts(worker.id, sent.heldLeaseIds, span);
    const removed = [...verdicts.removed];
    for (const leaseId of verdicts.undecided) {
      // Reserved one grace before the heartbeat, to within the precision of the clock's readings.
      this.count('undecided record');
      if ((await this.connections.observer.hexists(this.keys.leasesPrefix + worker.id, leaseId.slice(workerOfLease(leaseId).length + 1))) === 0)
        removed.push(leaseId);
    }
    const want = this.expected.heartbeat(worker.id, sent.capacity, sent.heldLeaseIds, span, removed);
    this.count('heartbeat');
    this.count('record dropped', want.dropped);
    this.count('record restored', want.restored);
    this.note(
      `${worker.id}'s heartbeat (${when}) arrives holding [${this.names(sent.heldLeaseIds)}]: drops [${this.names(removed)}], restores ${want.restored}`,
    );
    this.expect(
      `${reply.inflight} in flight, ${reply.leasesDropped} dropped, ${reply.leasesRestored} restored`,
      `${want.inflight} in flight, ${want.dropped} dropped, ${want.restored} restored`,
      `${worker.id}'s heartbeat reply`,
    );
    await this.compareWithLedger();
  }

  /** Every registered worker's capacity and count, and the totals, as the contract says. */
  private async compareWithLedger(): Promise<void> {
    const snapshot = await this.workerLedger.snapshot(cluster);
    const got = snapshot.workers.map((w) => `${w.workerId}: ${w.inflight} of ${w.capacity} in flight`);
    const expectedIds = [...this.expected.workers.keys()].sort();
    const want = expectedIds.map((id) => `${id}: ${this.expected.inflight(id)} of ${this.expected.workers.get(id)!.capacity} in flight`);
    const totals = this.expected.totals();
    const gotTotals = `capacity ${snapshot.totalCapacity}, free ${snapshot.totalFree}, leases ${snapshot.leases}`;
    const wantTotals = `capacity ${totals.capacity}, free ${totals.free}, leases ${totals.leases}`;
    const byIntegration = await this.workerLedger.integrationLimits(cluster);
    const gotCounts = byIntegration.map((s) => `${s.integration} ${s.inflight}`).join(', ');
    const wantCounts = [...this.expected.inflightByIntegration()]
      .filter(([, n]) => n > 0)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([i, n]) => `${i} ${n}`)
      .join(', ');
    if (got.join('; ') === want.join('; ') && gotTotals === wantTotals && gotCounts === wantCounts) return;
    const records = expectedIds.map((id) => `${id} [${this.names([...this.expected.workers.get(id)!.records.keys()])}]`).join('; ');
    this.fail(
      `the ledger differs from its contract:\n  ledger:   ${got.join('; ')}; ${gotTotals}; by integration: ${gotCounts}\n  contract: ${want.join('; ')}; ${wantTotals}; by integration: ${wantCounts}\n  records:  ${records}`,
    );
  }

  private compareReservation(got: Reservation, want: ExpectedReservation, priority: LedgerPriority): void {
    if (want.orAtRate && !got.ok && got.reason === 'integration-at-rate') return;
    const gotText = got.ok ? `a slot on a worker with ${got.freeSlotsBefore} free` : `none (${got.reason})`;
    const wantText = want.ok ? `a slot on a worker with ${want.freeSlots} free` : `none (${want.reason})`;
    this.expect(gotText, wantText, `a ${priority} reservation`);
    if (got.ok && want.ok && !want.workerIds.includes(got.workerId))
      this.fail(`a ${priority} reservation took ${got.workerId}, not one of the least loaded [${want.workerIds.join(', ')}]`);
  }

  private expect<T>(got: T, want: T, what: string): void {
    if (got !== want) this.fail(`${what}: the ledger says ${String(got)}, the model ${String(want)}`);
  }

  private fail(message: string): never {
    assert.fail(`${message}\n--- what happened in this run ---\n${this.trace.join('\n')}`);
  }

  private names(leaseIds: readonly string[]): string {
    return leaseIds.map((id) => this.fleet.nameOf(id)).join(', ');
  }
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}
