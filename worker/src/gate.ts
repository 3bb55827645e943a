/**
 * The parallelism gate: admits a task only while fewer than `maxParallelism` run.
 * This is the hard guarantee against over-admission; the ledger only decides where
 * tasks are sent. It also records the high-water mark so tests and operators can check it.
 *
 * With a local queue (`maxQueued` > 0, the worker's `--overflow queue`), a task that finds every
 * slot busy may wait here, first come first served, as a single-task worker of the old kind
 * queues behind its running task; balancers that send without a shared count of free slots
 * (round-robin, least-request) rely on it. Headroom's own balancers never need it.
 */
export class ParallelismGate {
  private running = 0;
  private highWater = 0;
  private refusedCount = 0;
  // FIFO; at most maxQueued long.
  private readonly waiting: Array<(admitted: boolean) => void> = [];

  constructor(
    private max: number,
    private readonly maxQueued = 0,
  ) {}

  get maxParallelism(): number {
    return this.max;
  }

  /** Raising frees slots at once (to waiting tasks first); lowering lets running tasks finish and admits none until below. */
  set maxParallelism(value: number) {
    this.max = value;
    this.admitWaiting();
  }

  get inflight(): number {
    return this.running;
  }

  /** Tasks waiting in the local queue. */
  get queued(): number {
    return this.waiting.length;
  }

  get queueLimit(): number {
    return this.maxQueued;
  }

  get highWaterMark(): number {
    return this.highWater;
  }

  get refusals(): number {
    return this.refusedCount;
  }

  /** Admits the task now, or answers false (then, with a local queue, it may `wait()`). */
  tryEnter(): boolean {
    // Waiting tasks go first: a newcomer does not pass them when a slot frees.
    if (this.running >= this.max || this.waiting.length > 0) {
      if (this.maxQueued === 0) this.refusedCount++;
      return false;
    }
    this.enter();
    return true;
  }

  /**
   * A place in the local queue, or undefined when it is full (or there is none). `admitted`
   * resolves true once the task holds a slot (it must `leave()` when it ends), or false when
   * `withdraw()` took it out first (its deadline passed, its caller left, the worker drains).
   */
  wait(): { admitted: Promise<boolean>; withdraw(): void } | undefined {
    if (this.waiting.length >= this.maxQueued) {
      this.refusedCount++;
      return undefined;
    }
    let settle!: (admitted: boolean) => void;
    const admitted = new Promise<boolean>((resolve) => (settle = resolve));
    this.waiting.push(settle);
    return {
      admitted,
      withdraw: () => {
        const at = this.waiting.indexOf(settle);
        if (at < 0) return;
        this.waiting.splice(at, 1);
        settle(false);
      },
    };
  }

  /** Takes every waiting task out of the queue (a draining worker sends them back). */
  withdrawAll(): void {
    for (const settle of this.waiting.splice(0)) settle(false);
  }

  leave(): void {
    this.running--;
    this.admitWaiting();
  }

  private enter(): void {
    this.running++;
    if (this.running > this.highWater) this.highWater = this.running;
  }

  private admitWaiting(): void {
    while (this.running < this.max && this.waiting.length > 0) {
      this.enter();
      this.waiting.shift()!(true);
    }
  }
}
