/**
 * The parallelism gate: admits a task only while fewer than `maxParallelism` run.
 * This is the hard guarantee against over-admission; the ledger only decides where
 * tasks are sent. It also records the high-water mark so tests and operators can check it.
 */
export class ParallelismGate {
  private running = 0;
  private highWater = 0;
  private refusedCount = 0;

  constructor(private max: number) {}

  get maxParallelism(): number {
    return this.max;
  }

  /** Raising frees slots at once; lowering lets running tasks finish and admits none until below. */
  set maxParallelism(value: number) {
    this.max = value;
  }

  get inflight(): number {
    return this.running;
  }

  get highWaterMark(): number {
    return this.highWater;
  }

  get refusals(): number {
    return this.refusedCount;
  }

  tryEnter(): boolean {
    if (this.running >= this.max) {
      this.refusedCount++;
      return false;
    }
    this.running++;
    if (this.running > this.highWater) this.highWater = this.running;
    return true;
  }

  leave(): void {
    this.running--;
  }
}
