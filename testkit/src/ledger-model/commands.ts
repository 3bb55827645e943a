/**
 * The steps fast-check strings together: each picks what it acts on by index among the
 * candidates of the moment (so a step stays meaningful when shrinking removes others), and is
 * skipped when there is none.
 */
import fc from 'fast-check';
import type { LedgerPriority } from '@headroom/fleet';
import type { DispatchOutcome, FleetWorld, GiveUpReason, TaskEnd } from './fleet-world';
import type { LedgerModelRun, ReleaseFate } from './run';

export type LedgerCommand = fc.AsyncCommand<FleetWorld, LedgerModelRun>;

const pick = <T>(items: readonly T[], index: number): T => items[index % items.length]!;
const aliveWorkers = (m: Readonly<FleetWorld>) => m.workers.filter((w) => w.alive);
const deadWorkers = (m: Readonly<FleetWorld>) => m.workers.filter((w) => !w.alive);
const toDispatch = (m: Readonly<FleetWorld>) => m.balancers.flatMap((balancer, b) => balancer.toDispatch.map((leaseId) => ({ b, leaseId })));
const awaited = (m: Readonly<FleetWorld>) => m.heldTasks((task) => task.answerTo !== 'worker');
const running = (m: Readonly<FleetWorld>) => m.heldTasks((task) => !task.releasing);
const releasing = (m: Readonly<FleetWorld>) => m.heldTasks((task) => task.releasing);

export class SendBatch implements LedgerCommand {
  constructor(
    readonly balancer: number,
    readonly releases: readonly ReleaseFate[],
    readonly reservations: readonly LedgerPriority[],
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return this.reservations.length > 0 || (this.releases.length > 0 && pick(m.balancers, this.balancer).outbox.length > 0);
  }
  run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    return r.sendBatch(this.balancer % m.balancers.length, this.releases, this.reservations);
  }
  toString(): string {
    return `batch(balancer #${this.balancer}, releases [${this.releases.join(' ')}], reserve [${this.reservations.join(' ')}])`;
  }
}

export class Dispatch implements LedgerCommand {
  constructor(
    readonly lease: number,
    readonly outcome: DispatchOutcome,
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return toDispatch(m).length > 0;
  }
  async run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    const { b, leaseId } = pick(toDispatch(m), this.lease);
    r.dispatch(b, leaseId, this.outcome);
  }
  toString(): string {
    return `dispatch(lease #${this.lease}, ${this.outcome})`;
  }
}

export class GiveUp implements LedgerCommand {
  constructor(
    readonly task: number,
    readonly reason: GiveUpReason,
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return awaited(m).length > 0;
  }
  async run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    const { worker, leaseId } = pick(awaited(m), this.task);
    r.giveUp(worker, leaseId, this.reason);
  }
  toString(): string {
    return `giveUp(task #${this.task}, ${this.reason})`;
  }
}

export class TaskEnds implements LedgerCommand {
  constructor(
    readonly task: number,
    readonly how: TaskEnd,
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return running(m).length > 0;
  }
  async run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    const { worker, leaseId } = pick(running(m), this.task);
    r.taskEnds(worker, leaseId, this.how);
  }
  toString(): string {
    return `taskEnds(task #${this.task}, ${this.how})`;
  }
}

export class WorkerRelease implements LedgerCommand {
  constructor(
    readonly task: number,
    readonly arrives: boolean,
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return releasing(m).length > 0;
  }
  run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    const { worker, leaseId } = pick(releasing(m), this.task);
    return r.workerRelease(worker, leaseId, this.arrives);
  }
  toString(): string {
    return `workerRelease(task #${this.task}, ${this.arrives ? 'arrives' : 'lost'})`;
  }
}

export class Heartbeat implements LedgerCommand {
  constructor(
    readonly worker: number,
    readonly later: boolean,
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return aliveWorkers(m).length > 0;
  }
  run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    return r.heartbeat(pick(aliveWorkers(m), this.worker), this.later);
  }
  toString(): string {
    return `heartbeat(live worker #${this.worker}${this.later ? ', slow' : ''})`;
  }
}

export class KillBalancer implements LedgerCommand {
  constructor(readonly balancer: number) {}
  check(): boolean {
    return true;
  }
  async run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    r.killBalancer(this.balancer % m.balancers.length);
  }
  toString(): string {
    return `killBalancer(#${this.balancer})`;
  }
}

export class KillWorker implements LedgerCommand {
  constructor(readonly worker: number) {}
  check(m: Readonly<FleetWorld>): boolean {
    return aliveWorkers(m).length > 0;
  }
  async run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    r.killWorker(pick(aliveWorkers(m), this.worker));
  }
  toString(): string {
    return `killWorker(live worker #${this.worker})`;
  }
}

export class RestartWorker implements LedgerCommand {
  constructor(
    readonly worker: number,
    readonly capacity: number,
  ) {}
  check(m: Readonly<FleetWorld>): boolean {
    return deadWorkers(m).length > 0;
  }
  run(m: FleetWorld, r: LedgerModelRun): Promise<void> {
    return r.restartWorker(pick(deadWorkers(m), this.worker), this.capacity);
  }
  toString(): string {
    return `restartWorker(dead worker #${this.worker}, ${this.capacity} slots)`;
  }
}

/** Steps that take no argument: time passes, the sweep runs, the bound is checked. */
export class Step implements LedgerCommand {
  constructor(readonly name: 'elapse' | 'sweep' | 'checkpoint') {}
  check(): boolean {
    return true;
  }
  run(_m: FleetWorld, r: LedgerModelRun): Promise<void> {
    return r[this.name]();
  }
  toString(): string {
    return this.name;
  }
}

const index = fc.nat({ max: 7 });
// Repeats weight the common cases: most releases arrive, most dispatched tasks run, most answers come back.
const releaseFates = fc.array(fc.constantFrom<ReleaseFate>('arrives', 'arrives', 'lost', 'duplicated'), { maxLength: 3 });
const priorities = fc.array(fc.constantFrom<LedgerPriority>('user', 'background'), { maxLength: 2 });
const dispatchOutcome = fc.constantFrom<DispatchOutcome>(
  'worker-runs',
  'worker-runs',
  'worker-runs',
  'worker-refuses',
  'deadline-before-start',
  'client-cancel-before-start',
);
const giveUpReason = fc.constantFrom<GiveUpReason>('deadline-after-start', 'client-cancel-after-start');
const taskEnd = fc.constantFrom<TaskEnd>('answered', 'answered', 'answered-as-deadline-fired');

/**
 * One step of the fleet's life, weighted so that a run reserves, dispatches, ends and releases
 * tasks enough to keep load on, and breaks something now and then.
 */
export const ledgerCommand: fc.Arbitrary<LedgerCommand> = fc.oneof(
  { weight: 10, arbitrary: fc.tuple(index, releaseFates, priorities).map(([b, fates, asked]) => new SendBatch(b, fates, asked)) },
  { weight: 12, arbitrary: fc.tuple(index, dispatchOutcome).map(([i, outcome]) => new Dispatch(i, outcome)) },
  { weight: 4, arbitrary: fc.tuple(index, giveUpReason).map(([i, reason]) => new GiveUp(i, reason)) },
  { weight: 12, arbitrary: fc.tuple(index, taskEnd).map(([i, how]) => new TaskEnds(i, how)) },
  { weight: 4, arbitrary: fc.tuple(index, fc.boolean()).map(([i, arrives]) => new WorkerRelease(i, arrives)) },
  { weight: 8, arbitrary: fc.tuple(index, fc.boolean()).map(([i, later]) => new Heartbeat(i, later)) },
  { weight: 1, arbitrary: index.map((b) => new KillBalancer(b)) },
  { weight: 1, arbitrary: index.map((i) => new KillWorker(i)) },
  { weight: 2, arbitrary: fc.tuple(index, fc.integer({ min: 1, max: 4 })).map(([i, capacity]) => new RestartWorker(i, capacity)) },
  { weight: 4, arbitrary: fc.constant(new Step('elapse')) },
  { weight: 1, arbitrary: fc.constant(new Step('sweep')) },
  { weight: 2, arbitrary: fc.constant(new Step('checkpoint')) },
);
