/**
 * The leak on purpose, so the worker's metrics can be seen catching one (heap used and old
 * space growing, major GCs lengthening). The bug it plays: after a task, the handler starts
 * waiting for the bank's settlement notice, a promise nobody awaits (floating) whose resolver
 * goes on a list that nothing ever drains, so the snapshot of the task's data its callback
 * closes over stays alive for good.
 *
 * Bounded: once `capBytes` (default 256 MiB) of snapshots are held, tasks stop leaking (they
 * are counted as `skippedTasks`), so a test machine is never harmed. Sizes are estimates (see
 * `estimateRetainedBytes`), on the high side.
 */

/** @default cap of retained snapshots: 256 MiB. */
export const defaultLeakCapBytes = 256 * 1024 * 1024;

export interface LeakStats {
  retainedTasks: number;
  /** Estimated bytes of heap the held snapshots keep alive. */
  retainedBytes: number;
  /** Leaky tasks that did not leak because the cap was reached. */
  skippedTasks: number;
  capBytes: number;
}

/**
 * Heap kept by a snapshot of JSON texts and what was parsed from them: the texts themselves
 * (one byte a character) and the parsed objects, which take about twice their text.
 */
export function estimateRetainedBytes(jsonTexts: readonly string[], otherBytes = 0): number {
  return 3 * jsonTexts.reduce((sum, text) => sum + text.length, 0) + otherBytes;
}

export class SettlementWatch {
  /** The bug: it only grows (up to the cap). */
  private readonly waitingForSettlement: (() => void)[] = [];
  private retainedBytes = 0;
  private skippedTasks = 0;

  constructor(readonly capBytes = defaultLeakCapBytes) {}

  /** Starts waiting, for ever, for a settlement of the task; answers false (and keeps nothing) past the cap. */
  watch(snapshot: object, estimatedBytes: number): boolean {
    if (this.retainedBytes + estimatedBytes > this.capBytes) {
      this.skippedTasks++;
      return false;
    }
    this.retainedBytes += estimatedBytes;
    void new Promise<object>((resolve) => {
      this.waitingForSettlement.push(() => resolve(snapshot));
    });
    return true;
  }

  stats(): LeakStats {
    return { retainedTasks: this.waitingForSettlement.length, retainedBytes: this.retainedBytes, skippedTasks: this.skippedTasks, capBytes: this.capBytes };
  }

  /** Lets go of every snapshot (tests; the fix would be to never keep them). */
  release(): void {
    this.waitingForSettlement.length = 0;
    this.retainedBytes = 0;
    this.skippedTasks = 0;
  }
}
