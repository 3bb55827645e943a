/**
 * Node-aware slots: a worker whose event loop stalls or whose heap nears V8's limit takes on
 * fewer tasks until it recovers, so that one CPU-heavy or leaky integration cannot drag down
 * every other task the worker runs (a late timer, a starved socket, an out-of-memory crash).
 *
 * Each check (one interval's figures) over a line halves the share of its slots the worker
 * advertises, down to one slot (it keeps running something, and so keeps being measured); each
 * check with every figure below `recoveryFraction` of its line doubles it back, up to all of
 * them. Between the two (the hysteresis band), the share holds: no flapping on a figure that
 * hovers at its line. The worker advertises the reduced count in its heartbeat and enforces it in
 * its gate, like a lower max parallelism: running tasks finish, new ones wait for the count.
 */
import { RuntimeSampler, type RuntimeSample } from '@headroom/common';
import type { WorkerSelfProtection } from '@headroom/fleet';

export type ProtectionReason = WorkerSelfProtection['reason'];
export const protectionReasons: readonly ProtectionReason[] = ['event-loop-delay', 'heap'];

export interface SelfProtectionLines {
  /** Event-loop delay p99 over one check interval, ms, above which slots are cut; 0: not checked. */
  eventLoopDelayP99Ms: number;
  /** Old generation used ÷ its limit (RuntimeSample) above which slots are cut; 0: not checked. */
  heapShare: number;
}

/** What a worker says of its protection in its report (null: none, every slot advertised). */
export type ProtectionState = WorkerSelfProtection;

/** A figure must fall below this share of its line before slots come back. */
export const recoveryFraction = 0.8;

export class SelfProtection {
  private slotShare = 1;
  private state: ProtectionState | null = null;
  private readonly episodes = new Map<ProtectionReason, number>(protectionReasons.map((reason) => [reason, 0]));

  constructor(
    private readonly lines: SelfProtectionLines,
    private readonly sample: () => RuntimeSample,
  ) {}

  get enabled(): boolean {
    return this.lines.eventLoopDelayP99Ms > 0 || this.lines.heapShare > 0;
  }

  /** Null when every slot is advertised. */
  get current(): ProtectionState | null {
    return this.state;
  }

  /** Times the worker started protecting itself, by the figure that crossed its line first. */
  episodesOf(reason: ProtectionReason): number {
    return this.episodes.get(reason) ?? 0;
  }

  /** The slots to advertise out of `wanted` (the flag's or the worker's own max parallelism): at least one. */
  capacity(wanted: number): number {
    return Math.max(1, Math.floor(wanted * this.slotShare));
  }

  /** Samples the runtime and moves the share; true when it changed (the worker then advertises at once). */
  check(nowUnixMs = Date.now()): boolean {
    const sample = this.sample();
    const figures: Array<{ reason: ProtectionReason; figure: number; line: number }> = [];
    if (this.lines.eventLoopDelayP99Ms > 0)
      figures.push({ reason: 'event-loop-delay', figure: sample.eventLoopDelayP99Ms, line: this.lines.eventLoopDelayP99Ms });
    if (this.lines.heapShare > 0) figures.push({ reason: 'heap', figure: sample.heapUsedBytes / sample.heapLimitBytes, line: this.lines.heapShare });
    const crossed = figures.find(({ figure, line }) => figure > line);
    if (crossed) {
      if (this.state === null) this.episodes.set(crossed.reason, this.episodesOf(crossed.reason) + 1);
      const before = this.slotShare;
      // Below 1/1024 the count is one slot for any max parallelism we accept (10,000).
      this.slotShare = Math.max(1 / 1024, this.slotShare / 2);
      this.state = { ...crossed, slotShare: this.slotShare, sinceUnixMs: this.state?.sinceUnixMs ?? nowUnixMs };
      return this.slotShare !== before;
    }
    if (this.state === null || !figures.every(({ figure, line }) => figure < line * recoveryFraction)) return false;
    this.slotShare = Math.min(1, this.slotShare * 2);
    this.state = this.slotShare === 1 ? null : { ...this.state, slotShare: this.slotShare };
    return true;
  }
}

/** A SelfProtection on a runtime sampler of its own (each check covers the time since the previous one). */
export function startSelfProtection(lines: SelfProtectionLines): { protection: SelfProtection; close(): void } {
  const sampler = new RuntimeSampler();
  return { protection: new SelfProtection(lines, () => sampler.sample()), close: () => sampler.close() };
}
