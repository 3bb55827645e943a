/**
 * The shapes of the control plane's REST API (/api/v1) and event stream, as the UI reads them.
 * Fields added recently are optional: an older control plane leaves them out and the UI shows
 * "—" in their place.
 */

export type Role = 'operator' | 'viewer';

export interface Session {
  name: string;
  role: Role;
}

export interface ClusterSummary {
  name: string;
  role: 'baseline' | 'candidate';
  workers: number;
  drainingWorkers: number;
  capacity: number;
  inFlight: number;
  free: number;
  leases: number;
  waitingBalancers: number;
  /** Over the last 30 s. */
  tasksPerSecond?: number;
  errorsPerSecond?: number;
}

export interface QueueDepth {
  userPresent: number;
  background: number;
}

export interface BalancerView {
  balancerId: string;
  address: string;
  lastHeartbeatUnixMs: number;
  /** Tasks waiting at that balancer for a slot, by priority; null when it did not say. */
  queued?: QueueDepth | null;
  ackedVersion: number | null;
  upToDate: boolean;
}

export interface WorkerStats {
  atUnixMs: number;
  heapUsedBytes: number;
  heapLimitBytes: number;
  /** Share of wall time spent in GC, 0..1. */
  gcTimeRatio: number;
  /** 0..1 */
  eventLoopUtilization: number;
  eventLoopDelayP99Ms: number;
  latencyP50Ms: number | null;
  latencyP99Ms: number | null;
  tasksPerSecond: number;
  errorsPerSecond: number;
  /** The worker advertises fewer slots: its event loop stalled or its heap neared the limit. */
  selfProtection?: {
    reason: 'event-loop-delay' | 'heap';
    figure: number;
    line: number;
    slotShare: number;
    sinceUnixMs: number;
  } | null;
}

export interface WorkerSummary {
  workerId: string;
  cluster: string;
  address: string;
  maxParallelism: number;
  inFlight: number;
  free: number;
  draining: boolean;
  /** Balancers skip it until then (they could not connect to it); null when not marked. */
  unreachableUntilUnixMs: number | null;
  lastHeartbeatUnixMs: number;
  stats?: WorkerStats | null;
}

export interface OverrideState {
  version: number;
  all: boolean;
  integrations: string[];
  updatedAtUnixMs: number;
  actor: string;
}

export interface Acknowledgement {
  balancerId: string;
  address: string;
  version: number;
  /** From the start of the change to this balancer's acknowledgement. */
  ackMs: number;
}

/**
 * A rollback or resume: POST /rollback's and /resume's answer (durable "pending"), the
 * `override-change` event (again once Unleash was written), and GET /traffic's lastRollback.
 */
export interface OverrideChangeRecord {
  kind: 'rollback' | 'resume';
  /** "all", or the integration. */
  scope: string;
  actor: string;
  reason: string | null;
  atUnixMs: number;
  overrideVersion: number;
  override: OverrideState;
  expected: string[];
  acknowledged: Acknowledgement[];
  missing: string[];
  /** To the last acknowledgement; null when no balancer was alive. */
  propagationMs: number | null;
  /** The Unleash write that makes it survive a loss of Redis data. */
  durable: 'pending' | 'done' | 'failed';
  durableError: string | null;
  durableAtUnixMs: number | null;
}

export type RollbackRecord = OverrideChangeRecord;

export interface IntegrationTraffic {
  percent: number;
  rolledBack: boolean;
}

export interface TrafficBalancerView extends BalancerView {
  /** Its flag client has the split Unleash holds now; null when it routes without the flag. */
  trafficFlagUpToDate: boolean | null;
}

export interface TrafficView {
  flag: { name: string; enabled: boolean; defaultPercent: number; integrations: Record<string, IntegrationTraffic> };
  effectivePercent: { default: number; integrations: Record<string, number> };
  override: OverrideState | null;
  durable: boolean;
  /** Unleash writes of rollbacks and resumes under way: `durable` may be false meanwhile. */
  unleashWritesPending: number;
  balancers: TrafficBalancerView[];
  lastRollback: RollbackRecord | null;
}

/** Per cluster: a number, or null for the workers' own setting. */
export type ParallelismByCluster = Record<string, number | null>;

export interface AuditEntry {
  id: string;
  atUnixMs: number;
  actor: string;
  action: string;
  target: string;
  /** What was asked: the request's body as validated. */
  request?: unknown;
  before: unknown;
  after: unknown;
  outcome: 'ok' | 'failed';
  error?: string;
  /** Why, as the operator gave it. */
  reason?: string;
}

export interface ClusterSlotFigures {
  tasksPerSecond: number;
  errorsPerSecond: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

/** One complete 10-second slot of GET /latency/series. */
export interface LatencySlot {
  startUnixMs: number;
  baseline: ClusterSlotFigures;
  candidate: ClusterSlotFigures;
  /** candidate / baseline latency per integration; null when one cluster ran none of it. */
  integrations: Record<string, { p50: number | null; p95: number | null }>;
}

export interface LatencySeries {
  slotSeconds: number;
  slots: LatencySlot[];
}

export interface ProfileFunction {
  /** "(anonymous)" for a function without a name; V8's own entries look like "(garbage collector)". */
  functionName: string;
  url: string;
  lineNumber: number;
  /** "url:line", or "" without a url. */
  location: string;
  /** Time the function itself was on the CPU (callees excluded). */
  selfMs: number;
  /** selfMs as a share of the profile's sampled time, idle included (0..1). */
  share: number;
}

export interface ProfileSummary {
  profiledMs: number;
  samples: number;
  idleMs: number;
  topFunctions: ProfileFunction[];
}

export interface ProfileRecord {
  profileId: string;
  workerId: string;
  cluster: string;
  address: string;
  durationMs: number;
  actor: string;
  status: 'running' | 'done' | 'failed';
  startedAtUnixMs: number;
  deadlineUnixMs: number;
  finishedAtUnixMs?: number;
  cpuprofileBytes?: number;
  summary?: ProfileSummary;
  error?: { code: string; message: string };
}

/** The `figures` event: sent on connecting and then every second or two. */
export interface Figures {
  atUnixMs: number;
  clusters: ClusterSummary[];
  balancers: BalancerView[];
  override: OverrideState | null;
}
