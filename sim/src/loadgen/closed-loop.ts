/**
 * Closed-loop sending: a fixed number of lanes, each sending its next call once the previous
 * one is answered, so the calls in flight stay at the number of lanes (throughput, or clients
 * that wait for their answers).
 */
import { performance } from 'node:perf_hooks';

/** Most lanes a closed loop runs. */
export const maxLanes = 4096;

export interface ClosedLoopOptions<Answer> {
  /** Calls in flight at once, 1..maxLanes. */
  lanes: number;
  /** Sends call `sequence` (numbered across lanes, from 0) from lane `lane`; resolves with its answer. */
  call(sequence: number, lane: number): Promise<Answer>;
  /** How long a lane waits after this answer before its next call (a client backing off after a failure). @default 0 */
  pauseAfterMs?(answer: Answer): number;
  /** Calls sent at most, all lanes together. */
  maxCalls: number;
  /** No call is sent this long after the start. */
  maxDurationMs: number;
}

export class ClosedLoop<Answer> {
  readonly startedAtMs = performance.now();
  private sent = 0;
  private sending = true;
  private readonly lanesDone: Promise<void>;

  constructor(private readonly options: ClosedLoopOptions<Answer>) {
    if (!(Number.isInteger(options.lanes) && options.lanes >= 1 && options.lanes <= maxLanes))
      throw new RangeError(`lanes ${options.lanes}: expected a whole number from 1 to ${maxLanes}`);
    this.lanesDone = Promise.all(Array.from({ length: options.lanes }, (_unused, lane) => this.lane(lane))).then(() => undefined);
  }

  /** Calls sent so far. */
  get sentCalls(): number {
    return this.sent;
  }

  /** Stops sending; calls in flight go on. Idempotent. */
  stop(): void {
    this.sending = false;
  }

  /** Resolves once every lane has ended (stopped, maxCalls or maxDurationMs) and its last call is answered. */
  finished(): Promise<void> {
    return this.lanesDone;
  }

  private async lane(lane: number): Promise<void> {
    const { call, pauseAfterMs, maxCalls, maxDurationMs } = this.options;
    const endsAtMs = this.startedAtMs + maxDurationMs;
    while (this.sending && this.sent < maxCalls && performance.now() < endsAtMs) {
      const answer = await call(this.sent++, lane);
      const pauseMs = pauseAfterMs?.(answer) ?? 0;
      if (pauseMs > 0) await new Promise((resolve) => setTimeout(resolve, pauseMs));
    }
  }
}
