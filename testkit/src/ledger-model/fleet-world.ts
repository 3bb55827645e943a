/**
 * The fleet around the ledger, as the model sees it: what each worker truly holds, what each
 * balancer still has to dispatch or release, and who gives each lease back. Pure state: the
 * harness (run.ts) does the Redis side.
 */

/** How a dispatch goes: the worker takes the task, or it never starts there (and the balancer gives the lease back). */
export type DispatchOutcome = 'worker-runs' | 'worker-refuses' | 'deadline-before-start' | 'client-cancel-before-start';
/** Why a balancer stops waiting for a task that started: it leaves the lease to the worker. */
export type GiveUpReason = 'deadline-after-start' | 'client-cancel-after-start';
/** How a task ends at its worker: answered, or answered just as the balancer's deadline fired (nobody releases then). */
export type TaskEnd = 'answered' | 'answered-as-deadline-fired';

/** A task a worker holds (queued or running). */
export interface HeldTask {
  /** The balancer (by slot) that waits for the answer and releases; 'worker' once it left the lease to the worker. */
  answerTo: number | 'worker';
  /** Ended, its worker sending its own release: held until that is through (worker.ts, answer()). */
  releasing: boolean;
}

/** What a heartbeat said when it was sent. */
export interface HeartbeatSent {
  capacity: number;
  heldLeaseIds: string[];
}

export interface ModelWorker {
  readonly id: string;
  readonly address: string;
  capacity: number;
  alive: boolean;
  /** What it truly runs: lease id -> task. */
  readonly held: Map<string, HeldTask>;
  /** A heartbeat sent and not yet arrived (one at a time, as the worker sends them). */
  heartbeatOnItsWay: HeartbeatSent | undefined;
  /** This process had a heartbeat through (HeartbeatInput.addressUnchanged). */
  heartbeatSucceeded: boolean;
}

export interface ModelBalancer {
  /** Leases reserved and not yet handed to their worker, oldest first. */
  readonly toDispatch: string[];
  /** Releases waiting in its batch window, oldest first. */
  readonly outbox: string[];
}

export class FleetWorld {
  readonly workers: ModelWorker[];
  readonly balancers: ModelBalancer[];
  /** Short names for the trace, by lease id: L1, L2, ... in order of reservation. */
  private readonly names = new Map<string, string>();

  constructor(capacities: readonly number[], balancerCount: number) {
    this.workers = capacities.map((capacity, i) => ({
      id: `w${i}`,
      address: `127.0.0.1:${7800 + i}`,
      capacity,
      alive: true,
      held: new Map(),
      heartbeatOnItsWay: undefined,
      heartbeatSucceeded: false,
    }));
    this.balancers = Array.from({ length: balancerCount }, () => ({ toDispatch: [], outbox: [] }));
  }

  worker(id: string): ModelWorker {
    return this.workers.find((w) => w.id === id)!;
  }

  nameOf(leaseId: string): string {
    return this.names.get(leaseId) ?? leaseId;
  }

  /** A lease reserved by balancer `b`, to dispatch. */
  reserved(b: number, leaseId: string): string {
    const name = `L${this.names.size + 1}`;
    this.names.set(leaseId, name);
    this.balancers[b]!.toDispatch.push(leaseId);
    return name;
  }

  /** Tasks the workers hold, with their worker, in a stable order (for picks). */
  heldTasks(filter: (task: HeldTask) => boolean): { worker: ModelWorker; leaseId: string; task: HeldTask }[] {
    return this.workers.flatMap((worker) => [...worker.held].filter(([, task]) => filter(task)).map(([leaseId, task]) => ({ worker, leaseId, task })));
  }

  /** Balancer `b` hands the lease it reserved to the worker; what became of it. */
  dispatch(b: number, leaseId: string, outcome: DispatchOutcome, workerId: string): string {
    const balancer = this.balancers[b]!;
    balancer.toDispatch.splice(balancer.toDispatch.indexOf(leaseId), 1);
    const worker = this.worker(workerId);
    if (outcome === 'worker-runs' && worker.alive && this.gateHasRoom(worker)) {
      worker.held.set(leaseId, { answerTo: b, releasing: false });
      return `${worker.id} runs it`;
    }
    // It did not start: the balancer owns the lease still and gives it back.
    balancer.outbox.push(leaseId);
    if (outcome !== 'worker-runs') return `b${b} will release it`;
    return `${worker.alive ? `${worker.id} is full and refuses` : `${worker.id} is dead (unreachable)`}: b${b} will release it`;
  }

  giveUp(workerId: string, leaseId: string): void {
    this.worker(workerId).held.get(leaseId)!.answerTo = 'worker';
  }

  /** A task held by `workerId` ends; what becomes of its lease. */
  taskEnds(workerId: string, leaseId: string, how: TaskEnd): string {
    const worker = this.worker(workerId);
    const task = worker.held.get(leaseId)!;
    if (task.answerTo === 'worker') {
      task.releasing = true;
      return `${worker.id} releases it itself (the balancer left it)`;
    }
    worker.held.delete(leaseId);
    if (how === 'answered-as-deadline-fired') return `b${task.answerTo} left it to the worker as the answer came: nobody releases it`;
    this.balancers[task.answerTo]!.outbox.push(leaseId);
    return `b${task.answerTo} got the answer and will release it`;
  }

  /** The worker's own release went through, or was lost: it no longer holds the lease. */
  workerReleased(workerId: string, leaseId: string): void {
    this.worker(workerId).held.delete(leaseId);
  }

  /** Balancer `b`'s process dies and a new one takes its place; what it left behind. */
  killBalancer(b: number): string {
    const balancer = this.balancers[b]!;
    const left = `never dispatched: [${balancer.toDispatch.map((id) => this.nameOf(id)).join(', ')}], releases lost: [${balancer.outbox.map((id) => this.nameOf(id)).join(', ')}]`;
    balancer.toDispatch.length = 0;
    balancer.outbox.length = 0;
    // Its calls end with it: each worker sees its call cancelled and releases the lease itself.
    for (const { task } of this.heldTasks((t) => t.answerTo === b)) task.answerTo = 'worker';
    return left;
  }

  /** The worker's process dies: its tasks vanish, no release follows them, and a heartbeat it had on its way is lost with it. */
  killWorker(workerId: string): void {
    const worker = this.worker(workerId);
    worker.alive = false;
    worker.held.clear();
    worker.heartbeatOnItsWay = undefined;
    worker.heartbeatSucceeded = false;
  }

  /** Started again under the same id, holding nothing (its first heartbeat is the caller's). */
  restartWorker(workerId: string, capacity: number): void {
    const worker = this.worker(workerId);
    worker.alive = true;
    worker.capacity = capacity;
  }

  heartbeatToSend(worker: ModelWorker): HeartbeatSent {
    return { capacity: worker.capacity, heldLeaseIds: [...worker.held.keys()] };
  }

  /** The worker's gate: at most its max parallelism running; a task whose release is being sent left the gate already. */
  private gateHasRoom(worker: ModelWorker): boolean {
    let running = 0;
    for (const task of worker.held.values()) if (!task.releasing) running++;
    return running < worker.capacity;
  }
}
