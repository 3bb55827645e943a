/**
 * Open-loop sending: calls are due on a schedule whatever the answers do, as real clients
 * arrive, so a slow target shows up as latency and errors, not as a lower rate. Calls awaiting
 * answers are bounded: a call due beyond the bound is dropped and counted, never queued.
 * Schedules count what is due in closed form from the start, so a late timer sends what it owes.
 */
import { performance } from 'node:perf_hooks';

/** Most calls an open loop keeps awaiting answers: the memory benchmark holds 100,000 tasks in a balancer's queue. */
export const maxOutstandingCallsLimit = 200_000;

export interface OpenLoopSchedule {
  /** Calls due from the start to `elapsedMs` (whole calls, non-decreasing). */
  dueBy(elapsedMs: number): number;
  /** When call `sequence` is due, since the start: with it the loop wakes just in time for each call (see OpenLoopOptions.tickMs). */
  dueAtMs?(sequence: number): number;
  /** A finite schedule: it ends once this many calls were due. */
  totalCalls?: number;
  /**
   * Most calls sent in one tick (the process stalled); beyond it, calls due are dropped
   * ('drop', counted as behind-schedule) or left for the next ticks ('defer'). @default no limit
   */
  maxBurst?: { calls: number; pastDue: 'drop' | 'defer' };
}

/** One call to send: the `sequence`-th due of schedule `schedule` (dropped calls count too). */
export interface DueCall {
  schedule: number;
  sequence: number;
  /** Of the tick that sends it, since the start. */
  elapsedMs: number;
}

export interface DroppedCalls {
  schedule: number;
  reason: 'outstanding-limit' | 'behind-schedule';
  /** The first of the dropped calls' sequence numbers; they follow on. */
  firstSequence: number;
  calls: number;
  elapsedMs: number;
}

export interface OpenLoopOptions {
  /**
   * Served in order at each tick and sharing the outstanding bound: when it bites, the later
   * schedules' calls are the ones dropped.
   */
  schedules: readonly OpenLoopSchedule[];
  /** Calls awaiting answers at most, 1..maxOutstandingCallsLimit. */
  maxOutstandingCalls: number;
  /** Time between ticks; 'when-due': at the next call's due time (every schedule must give dueAtMs). */
  tickMs: number | 'when-due';
  /** Sends the call; settles when it is answered. */
  send(call: DueCall): Promise<unknown>;
  onDropped?(dropped: DroppedCalls): void;
  /** Calls sent at most, all schedules together; then the loop stops sending. */
  maxCalls?: number;
  /** The loop stops sending this long after the start. */
  maxDurationMs?: number;
}

/** Sends calls on schedule until stopped, or until its schedules, maxCalls or maxDurationMs end. */
export class OpenLoop {
  readonly startedAtMs = performance.now();
  private readonly accounted: number[];
  private outstanding = 0;
  private sent = 0;
  private sending = true;
  private timer: NodeJS.Timeout | undefined;
  private readonly whenStopped: Promise<void>;
  private markStopped!: () => void;
  private readonly idleWaiters = new Set<() => void>();

  constructor(private readonly options: OpenLoopOptions) {
    const { maxOutstandingCalls, schedules, tickMs } = options;
    if (!(Number.isInteger(maxOutstandingCalls) && maxOutstandingCalls >= 1 && maxOutstandingCalls <= maxOutstandingCallsLimit)) {
      throw new RangeError(`maxOutstandingCalls ${maxOutstandingCalls}: expected a whole number from 1 to ${maxOutstandingCallsLimit}`);
    }
    if (tickMs === 'when-due' && !schedules.every((schedule) => schedule.dueAtMs))
      throw new RangeError("tickMs 'when-due': expected dueAtMs on every schedule");
    this.accounted = schedules.map(() => 0);
    this.whenStopped = new Promise((resolve) => (this.markStopped = resolve));
    this.schedule(0);
  }

  get outstandingCalls(): number {
    return this.outstanding;
  }

  /** Calls sent so far. */
  get sentCalls(): number {
    return this.sent;
  }

  /** Calls of schedule `index` due so far: sent, dropped, or (once maxCalls were sent) neither. */
  dueCalls(index: number): number {
    return this.accounted[index] ?? 0;
  }

  /** Stops sending; calls awaiting answers go on. Idempotent. */
  stop(): void {
    if (!this.sending) return;
    this.sending = false;
    clearTimeout(this.timer);
    this.markStopped();
    this.notifyIfIdle();
  }

  /** Resolves once the loop stopped sending (see stop) and no call awaits its answer. */
  async finished(): Promise<void> {
    await this.whenStopped;
    await this.idle(Number.POSITIVE_INFINITY);
  }

  /** Resolves once no call awaits its answer, or after `timeoutMs`: true if none does. */
  idle(timeoutMs: number): Promise<boolean> {
    if (this.outstanding === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(giveUp);
        this.idleWaiters.delete(done);
        resolve(this.outstanding === 0);
      };
      const giveUp = Number.isFinite(timeoutMs) ? setTimeout(done, timeoutMs) : undefined;
      giveUp?.unref();
      this.idleWaiters.add(done);
    });
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => this.tick(), Math.max(0, delayMs));
    this.timer.unref();
  }

  private tick(): void {
    const { schedules, maxCalls = Number.POSITIVE_INFINITY, maxDurationMs = Number.POSITIVE_INFINITY } = this.options;
    const elapsedMs = performance.now() - this.startedAtMs;
    if (elapsedMs >= maxDurationMs) return this.stop();
    schedules.forEach((schedule, index) => this.sendDue(schedule, index, elapsedMs));
    const ended = schedules.every((schedule, index) => schedule.totalCalls !== undefined && this.accounted[index]! >= schedule.totalCalls);
    if (ended || this.sent >= maxCalls) return this.stop();
    this.schedule(this.nextTickInMs());
  }

  private sendDue(schedule: OpenLoopSchedule, index: number, elapsedMs: number): void {
    const { maxOutstandingCalls, maxCalls = Number.POSITIVE_INFINITY } = this.options;
    const due = Math.min(schedule.dueBy(elapsedMs), schedule.totalCalls ?? Number.POSITIVE_INFINITY) - this.accounted[index]!;
    if (due <= 0) return;
    const burst = schedule.maxBurst;
    const sending = burst ? Math.min(due, burst.calls) : due;
    if (due > sending && burst?.pastDue === 'drop') {
      this.options.onDropped?.({
        schedule: index,
        reason: 'behind-schedule',
        firstSequence: this.accounted[index]! + sending,
        calls: due - sending,
        elapsedMs,
      });
    }
    const firstSequence = this.accounted[index]!;
    this.accounted[index] = firstSequence + (burst?.pastDue === 'defer' ? sending : due);
    for (let sequence = firstSequence; sequence < firstSequence + sending; sequence++) {
      // The loop ends at maxCalls (see tick): the calls left are neither sent nor dropped.
      if (this.sent >= maxCalls) return;
      if (this.outstanding >= maxOutstandingCalls) {
        this.options.onDropped?.({ schedule: index, reason: 'outstanding-limit', firstSequence: sequence, calls: 1, elapsedMs });
        continue;
      }
      this.sendOne({ schedule: index, sequence, elapsedMs });
    }
  }

  private sendOne(call: DueCall): void {
    this.outstanding++;
    this.sent++;
    const answered = () => {
      this.outstanding--;
      this.notifyIfIdle();
    };
    this.options.send(call).then(answered, answered);
  }

  private notifyIfIdle(): void {
    if (this.outstanding > 0) return;
    for (const waiter of [...this.idleWaiters]) waiter();
  }

  private nextTickInMs(): number {
    const { tickMs, schedules } = this.options;
    if (tickMs !== 'when-due') return tickMs;
    const nextDueAtMs = Math.min(...schedules.map((schedule, index) => schedule.dueAtMs!(this.accounted[index]!)));
    return nextDueAtMs - (performance.now() - this.startedAtMs);
  }
}
