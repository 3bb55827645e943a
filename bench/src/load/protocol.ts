/**
 * Messages between the benchmark and its load-generator process (over the fork() IPC channel).
 * Each phase is one request and one answer; the generator runs one phase at a time.
 */
import type { LatencySummary } from '../report/histogram';

/**
 * The paths a phase can call (targets.ts builds each): direct, the workers straight; haproxy,
 * HAProxy in front of them; balancer, the balancers; proxyless, the proxyless client on the
 * balancers' ledger. Named here, in the contract both processes read, so that the phases can say
 * which without loading the gRPC and Redis clients that call them.
 */
export const targetNames = ['balancer', 'direct', 'haproxy', 'proxyless'] as const;
export type TargetName = (typeof targetNames)[number];

export interface Targets {
  /** Balancer calls go to these in turn (the call's route picks one). */
  balancerAddresses: readonly string[];
  /** Direct calls go to these; empty when only the balancers are called. */
  workers: readonly { address: string; cluster: string; workerId: string }[];
  /** HAProxy in front of `workers` (leastconn; the workers accept unaddressed tasks): calls through it name no worker. */
  haproxy?: { address: string };
  /** The ledger the balancers use: the proxyless client reserves its slots there, under the same key prefix (and the balancer's default clusters). */
  ledger?: { redisUrl: string; keyPrefix: string };
  task: TaskTemplate;
  /** Each task's own deadline, from when it is sent; the gRPC call's is that or a second later (see callDeadlineMarginMs). */
  callTimeoutMs: number;
}

/** What every task carries; id and key change per call. */
export interface TaskTemplate {
  /** `echo` returns the payload and does no work; any other integration runs the demo handler (sim/src/handlers/demo.ts). */
  integration: string;
  /** For the demo handler, JSON such as {"sleepMs": 30}. */
  payload: string;
  /**
   * Several integrations instead of `integration`, in proportion to their weights, in a fixed
   * cycle so every phase gets the same mix: [bank-a:3, bank-b:1] sends a, a, a, b, a, a, a, b, ...
   */
  integrationMix?: readonly { name: string; weight: number }[];
  /** @default 'USER_PRESENT' */
  priority?: Priority;
  /**
   * Both priorities instead of `priority`, in a fixed cycle as `integrationMix`:
   * [USER_PRESENT:1, BACKGROUND:7] makes one task in eight user-present. Give the two mixes
   * cycles of coprime lengths (5 and 8) so that every integration gets both priorities.
   */
  priorityMix?: readonly { priority: Priority; weight: number }[];
}

export type Priority = 'USER_PRESENT' | 'BACKGROUND';

/** A measured task the balancer answered with its placement: where the time went. */
export interface TaskTrace {
  latencyMs: number;
  integration: string;
  priority: Priority;
  workerId: string;
  /** In the balancer's queue, waiting for a slot (Placement.queue_wait_ms). */
  balancerQueueWaitMs: number;
  /** In the worker's own queue (--overflow queue), waiting for a slot (Placement.worker_queue_wait_ms). */
  workerQueueWaitMs: number;
  /** The handler's own time. */
  runMs: number;
}

/** Balancer calls only: the time the measured tasks waited for a slot, from their placements. */
export interface QueuedFigures {
  /** Successful tasks whose answer carried a placement. */
  tasks: number;
  /** Of them, those that waited in a worker's local queue (worker_queue_wait_ms > 0). */
  waitedInWorker: number;
  /** The balancer's wait plus the worker's, per task. */
  queuedMs: LatencySummary;
  /** Every task's, with `keepLatencies` (to pool several phases' tasks). */
  queuedMsList?: number[];
  /** Every task's handler time (Placement.run_ms), with `keepLatencies`: the floor no placement goes below. */
  runMsList?: number[];
  /** Every task's latency minus its handler time, with `keepLatencies`: what placing it cost (queues, travel, waiting for a CPU). */
  addedMsList?: number[];
  /** The slowest tasks (at most maxTracedTasks), slowest first, with `keepLatencies`. */
  slowest?: TaskTrace[];
}

/** The figures of one integration's calls in a phase. */
export interface IntegrationFigures {
  succeeded: number;
  latency: LatencySummary;
  errorsByCode: Record<string, number>;
  /** Every latency of a successful call, with `keepLatencies` (to pool several phases' tasks). */
  latenciesMs?: number[];
}

/** A fixed number of calls outstanding at all times: measures throughput. */
export interface ClosedLoopSpec {
  kind: 'closed';
  target: TargetName;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
  /** Upper bound on calls, whatever the time. */
  maxCalls: number;
  /** Return every latency by integration too (at most maxKeptLatencies), to pool several phases' tasks. */
  keepLatencies?: boolean;
  /** Processes (name → pid) whose CPU time over the measured window the result gives (PhaseResult.cpu). */
  cpuOf?: Record<string, number>;
}

/**
 * Calls start at a fixed rate whether or not earlier ones have finished, and latency counts
 * from when a call was due, so a stall shows up as latency (no coordinated omission).
 */
export interface OpenLoopSpec {
  kind: 'open';
  target: TargetName;
  tasksPerSecond: number;
  warmupMs: number;
  durationMs: number;
  /** Calls due while this many are outstanding are not sent and count as dropped. */
  maxOutstanding: number;
  /** Return every latency by integration too (at most maxKeptLatencies), to pool several phases' tasks. */
  keepLatencies?: boolean;
  /** Processes (name → pid) whose CPU time over the measured window the result gives (PhaseResult.cpu). */
  cpuOf?: Record<string, number>;
  /** Balancer target only: a slow bank during part of the phase (see IncidentSpec). */
  incident?: IncidentSpec;
  /** Balancer target only: extra background tasks during part of the phase (see BackgroundSpikeSpec). */
  backgroundSpike?: BackgroundSpikeSpec;
  /** Return every task's record (PhaseResult.taskRecords, at most maxTaskRecords, warm-up included), to split the phase by time. */
  keepTaskRecords?: boolean;
}

/**
 * An incident of one integration, per task and in time: its tasks due from `fromMs` to `untilMs`
 * after the phase starts carry {"sleepFactor": sleepFactor} in their payload, which the sleep
 * handlers (fleet/sleep-handlers.ts) multiply their wait by. Tasks sent before or after run as usual.
 */
export interface IncidentSpec {
  integration: string;
  sleepFactor: number;
  fromMs: number;
  untilMs: number;
}

/**
 * A spike of background work: from `fromMs` to `untilMs` after the phase starts, a second schedule
 * sends `extraTasksPerSecond` more tasks, all BACKGROUND, over the same integrations, beside the
 * phase's own (whose priority mix goes on). The benchmark sets the extra rate: a spike of 10x
 * background is 9x the phase's background rate on top of it.
 */
export interface BackgroundSpikeSpec {
  extraTasksPerSecond: number;
  fromMs: number;
  untilMs: number;
}

/** The extra tasks' sequence numbers start here (the id's suffix, the sleep handlers' seed): apart from the phase's own. */
export const spikeSequenceBase = 1_000_000_000;

/** Tasks a phase returns one by one at most: some 40 MB of JSON over the IPC channel. */
export const maxTaskRecords = 400_000;

/** One task of an open-loop phase with `keepTaskRecords`. */
export interface TaskRecord {
  /** When it was due, from the phase's start. */
  dueMs: number;
  integration: string;
  priority: Priority;
  /** '' when it succeeded, else its code (HR_ERR_* or the gRPC status). */
  code: string;
  /** From when it was due to its answer. */
  latencyMs: number;
  /** The handler's own time (Placement.run_ms), when the answer carried a placement. */
  runMs?: number;
  /**
   * Time it waited for a slot, at the front or in a worker's own queue (Placement.queue_wait_ms
   * plus worker_queue_wait_ms), when the answer carried a placement: what admission decides, without
   * the travel and the CPU queueing that latency minus run time also holds.
   */
  slotWaitMs?: number;
}

export type PhaseSpec = ClosedLoopSpec | OpenLoopSpec;

export interface PhaseResult {
  spec: PhaseSpec;
  /** Calls answered with a result during the measured window. */
  succeeded: number;
  /** Failures during the measured window, by code (HR_ERR_* or the gRPC status). */
  errorsByCode: Record<string, number>;
  /** Open loop only: calls never sent because maxOutstanding were in flight. */
  dropped: number;
  /** Successful calls per second over the measured window. */
  tasksPerSecond: number;
  /** Open loop: from when each call was due; closed loop: from when it was sent. */
  latency: LatencySummary;
  /** Open loop only: how late the generator sent calls (its own scheduling delay). */
  sendLag: LatencySummary;
  /** Calls sent in all, warm-up included. */
  calls: number;
  elapsedMs: number;
  /** The measured window's figures by integration. */
  byIntegration: Record<string, IntegrationFigures>;
  /** The same by priority (USER_PRESENT, BACKGROUND). */
  byPriority: Record<string, IntegrationFigures>;
  /** Where the measured tasks waited (balancer calls). */
  queued: QueuedFigures;
  /** With `keepTaskRecords` (open loop): every task sent, in the order they were answered. */
  taskRecords?: TaskRecord[];
  /** With `keepTaskRecords`: tasks sent, and answered (success or error), warm-up included; taskRecords holds the answered ones up to its cap. */
  sentCalls?: number;
  answeredCalls?: number;
  /** With `cpuOf`: the processes' CPU time from the start of the measured window to its end (see cpu-window.ts). */
  cpu?: CpuWindowFigures;
}

/** CPU time of some processes over a window, and the tasks answered with a result in it. */
export interface CpuWindowFigures {
  windowMs: number;
  /** Successful calls answered between the window's two readings. */
  tasks: number;
  /** Per process (user + system, all threads, from /proc/<pid>/stat; 10 ms ticks); missing when it could not be read. */
  cpuMsByProcess: Record<string, number>;
}

/** `stop` ends an open-loop phase early: no further calls are sent, and the answer comes once the outstanding ones are answered. */
export type ToGenerator = { type: 'run'; id: number; spec: PhaseSpec } | { type: 'stop'; id: number };
export type FromGenerator = { type: 'ready' } | { type: 'result'; id: number; result: PhaseResult } | { type: 'failed'; id: number; message: string };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Checks the shape of a message from the generator; the result itself comes from our own code. */
export function asFromGenerator(value: unknown): FromGenerator | undefined {
  if (!isRecord(value)) return undefined;
  if (value.type === 'ready') return { type: 'ready' };
  if (value.type === 'result' && typeof value.id === 'number' && isRecord(value.result)) return value as FromGenerator;
  if (value.type === 'failed' && typeof value.id === 'number' && typeof value.message === 'string') return value as FromGenerator;
  return undefined;
}

export function asToGenerator(value: unknown): ToGenerator | undefined {
  if (isRecord(value) && value.type === 'stop' && typeof value.id === 'number') return { type: 'stop', id: value.id };
  if (!isRecord(value) || value.type !== 'run' || typeof value.id !== 'number' || !isRecord(value.spec)) return undefined;
  const spec = value.spec;
  if ((spec.kind !== 'closed' && spec.kind !== 'open') || typeof spec.target !== 'string') return undefined;
  return value as ToGenerator;
}

/** At most 64 entries, each with a whole weight from 1 to 1000 (the cycle is built in memory). */
function isMix(value: unknown, isEntry: (entry: Record<string, unknown>) => boolean): boolean {
  return (
    Array.isArray(value) &&
    value.length >= 1 &&
    value.length <= 64 &&
    value.every(
      (entry) => isRecord(entry) && isEntry(entry) && Number.isInteger(entry.weight) && (entry.weight as number) >= 1 && (entry.weight as number) <= 1000,
    )
  );
}

const isPriority = (value: unknown) => value === 'USER_PRESENT' || value === 'BACKGROUND';

export function asTargets(value: string | undefined): Targets {
  const parsed: unknown = JSON.parse(value ?? 'null');
  const task = isRecord(parsed) ? parsed.task : undefined;
  if (
    !isRecord(parsed) ||
    !Array.isArray(parsed.balancerAddresses) ||
    !Array.isArray(parsed.workers) ||
    !isRecord(task) ||
    typeof task.integration !== 'string' ||
    typeof task.payload !== 'string' ||
    typeof parsed.callTimeoutMs !== 'number' ||
    (parsed.haproxy !== undefined && !(isRecord(parsed.haproxy) && typeof parsed.haproxy.address === 'string')) ||
    (parsed.ledger !== undefined && !(isRecord(parsed.ledger) && typeof parsed.ledger.redisUrl === 'string' && typeof parsed.ledger.keyPrefix === 'string')) ||
    (task.integrationMix !== undefined && !isMix(task.integrationMix, (entry) => typeof entry.name === 'string')) ||
    (task.priorityMix !== undefined && !isMix(task.priorityMix, (entry) => isPriority(entry.priority))) ||
    (task.priority !== undefined && !isPriority(task.priority))
  ) {
    throw new Error(`load generator: expected the targets as JSON in argv[2], got ${String(value).slice(0, 200)}`);
  }
  return parsed as unknown as Targets;
}
