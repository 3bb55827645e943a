/**
 * What the load generator calls: one target per path (targets.ts, proxyless-target.ts), each
 * built from the same CallSettings. Apart from the factories, so that a target of its own file
 * and the loops that drive targets need none of the others.
 */
import type { PlacementFigures } from '@headroom/sim';
import type { Priority } from './protocol';

/** How a call ended, the integration and priority of its task, and (through a balancer) its placement. */
export type CallOutcome = ({ ok: true; placement?: PlacementFigures } | { ok: false; code: string }) & { integration: string; priority: Priority };

/** A task's own slowdown (IncidentSpec): tasks of `integration` carry {"sleepFactor": sleepFactor} as their payload. */
export interface SlowdownMark {
  integration: string;
  sleepFactor: number;
}

/** What one call changes of its task: honoured by the balancer target only (the incidents benchmark's path). */
export interface CallMarks {
  slowdown?: SlowdownMark;
  /** Instead of the priority mix's: a background spike's extra tasks (BackgroundSpikeSpec). */
  priority?: Priority;
}

/** One call; `route` spreads direct calls over the workers (the same route always reaches the same worker). */
export type Call = (sequence: number, route: number, marks?: CallMarks) => Promise<CallOutcome>;

export interface CallTarget {
  call: Call;
  waitForReady(timeoutMs: number): Promise<void>;
  close(): void;
}

export interface CallSettings {
  integrationOf: (sequence: number) => string;
  priorityOf: (sequence: number) => Priority;
  payload: Buffer;
  runId: string;
  callTimeoutMs: number;
}
