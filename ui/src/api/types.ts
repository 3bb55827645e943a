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
  /** Workers' latest reports plus the balancers' errors. */
  tasksPerSecond?: number;
  /** On the workers, and in the balancers before any worker ran them. */
  errorsPerSecond?: number;
  /** Tasks the balancers failed before any worker ran them (deadline passed in the queue, queue full, shed...), per second. */
  balancerErrorsPerSecond?: number;
  /** The same by integration and HR_ERR_* code, the most first. */
  balancerErrors?: { integration: string; code: string; perSecond: number }[];
  /** Tasks the workers held (queued or running) at their last heartbeats. */
  heldByWorkers?: number;
  /** inFlight minus heldByWorkers: slots the ledger counts that the workers do not run. */
  ledgerDriftSlots?: number;
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
  /** Balancers skip it until then (ejected: see ejectedReason); null when not marked. */
  unreachableUntilUnixMs: number | null;
  /** Why balancers skip it: they could not connect to it, or it failed far more than the other workers; null when not marked. */
  ejectedReason: 'unreachable' | 'failing' | null;
  lastHeartbeatUnixMs: number;
  /** Tasks it held (queued or running) at its last heartbeat; null when it did not say. */
  heldAtHeartbeat?: number | null;
  /** inFlight minus heldAtHeartbeat; null when it did not say. */
  ledgerDriftSlots?: number | null;
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
  /** Each cluster over only the integrations both ran in the slot, the candidate weighted to the baseline's mix. */
  sameMix: { baselineP50Ms: number | null; baselineP95Ms: number | null; candidateP50Ms: number | null; candidateP95Ms: number | null };
}

export interface LatencySeries {
  slotSeconds: number;
  slots: LatencySlot[];
  /** Integrations with a finished task on both clusters over the window, and on only one. */
  mix: { compared: string[]; baselineOnly: string[]; candidateOnly: string[] };
}

/** One integration over one window of GET /latency/integrations, both clusters together. */
export interface IntegrationWindowFigures {
  tasks: number;
  errors: number;
  p50Ms: number | null;
  p99Ms: number | null;
}

export interface IntegrationHealth {
  integration: string;
  recent: IntegrationWindowFigures;
  previous: IntegrationWindowFigures;
  verdict: { state: 'trouble' | 'ok' | 'not-enough-data'; p99Ratio: number | null; errorShare: number | null; reasons: string[] };
  slots: { startUnixMs: number; p50Ms: number | null; p99Ms: number | null; errorShare: number | null }[];
}

/** GET /latency/integrations. */
export interface IntegrationHealthView {
  slotSeconds: number;
  rule: { recentMs: number; previousMs: number; p99RatioAtLeast: number; p99RiseAtLeastMs: number; errorShareAtLeast: number; minTasks: number };
  integrations: IntegrationHealth[];
  hiddenIntegrations: number;
  hiddenInTrouble: number;
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
  /** selfMs as a share of the CPU time (sampled time less idle), as the flame graph counts it (0..1). */
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

/** The lines of a rollout plan: per integration (latency ratios, error rate) and for the candidate's workers. */
export type GateName = 'p50Ratio' | 'p95Ratio' | 'errorRateIncrease' | 'gcShare' | 'eventLoopUtilization' | 'eventLoopDelayP99Ms' | 'heapShare';

/** `close`: above 90% of its line (the autopilot holds); `not-enough-data`: nothing is decided on it. */
export type GateStatus = 'ok' | 'close' | 'breached' | 'not-enough-data';

export interface GateReading {
  gate: GateName;
  /** null when there is not enough data to tell. */
  value: number | null;
  line: number;
  status: GateStatus;
}

export interface IntegrationReading {
  integration: string;
  /** Tasks each cluster ran of it in the window. */
  samples: { baseline: number; candidate: number };
  gates: GateReading[];
  status: GateStatus;
}

/** The gates as the autopilot last read them. */
export interface GatesReading {
  atUnixMs: number;
  windowSeconds: number;
  integrations: IntegrationReading[];
  workers: { reporting: number; gates: GateReading[]; status: GateStatus };
}

export interface PlanStep {
  candidatePercent: number;
  /** Either this or `search`. */
  maxParallelism?: number;
  search?: { from: number; factor: number; max: number };
  holdSeconds: number;
}

/** A plan as the control plane keeps it: every default filled in. */
export interface RolloutPlan {
  name: string;
  integrations: string[];
  windowSeconds: number;
  holdSeconds: number;
  minSamples: number;
  gates: Record<GateName, number>;
  steps: PlanStep[];
}

export type RolloutStatus = 'running' | 'paused' | 'completed' | 'rolled-back' | 'aborted';

export type DecisionKind = 'start' | 'step' | 'raise' | 'back-off' | 'hold' | 'rollback' | 'complete' | 'pause' | 'resume' | 'abort';

export interface RolloutDecision {
  atUnixMs: number;
  kind: DecisionKind;
  /** 0-based. */
  step: number;
  integration?: string;
  message: string;
  /** "autopilot", or the operator's token name. */
  actor: string;
}

export interface Rollout {
  id: string;
  plan: RolloutPlan;
  status: RolloutStatus;
  createdBy: string;
  createdAtUnixMs: number;
  updatedAtUnixMs: number;
  finishedAtUnixMs: number | null;
  /** The step in effect, 0-based. */
  step: number;
  stepStartedAtUnixMs: number;
  /** The candidate cluster's max parallelism the autopilot set. */
  maxParallelism: number;
  search: { current: number; highestHeld: number | null } | null;
  /** On a step with every task on the candidate: the baseline's window ending here is the comparison. */
  baselineUntilUnixMs: number | null;
  heldSinceUnixMs: number | null;
  /** Since when a gate has been close to its line in this hold (which then lasts twice as long). */
  closeSinceUnixMs?: number | null;
  rolledBack: string[];
  /** Why the autopilot does not advance now. */
  waitingFor: string | null;
  lastReading: GatesReading | null;
  /** Oldest first, the latest 200. */
  decisions: RolloutDecision[];
}

/** GET /rollouts. */
export interface RolloutsView {
  /** Running or paused, else the latest finished; null before the first. */
  current: Rollout | null;
  /** Finished ones, newest first. */
  history: Rollout[];
  /** Whether the autopilot of the control plane that answered holds the lease. */
  actingHere: boolean;
}

/**
 * An integration's own limit (or the default's form, with minInFlight); auto: the control plane
 * moves the count between its bounds. maxStartsPerSecond: a start rate beside the in-flight part,
 * or alone (the default in-flight limit then applies).
 */
export type IntegrationLimit =
  | { maxInFlight: number; maxStartsPerSecond?: number }
  | { shareOfCapacity: number; minInFlight?: number; maxStartsPerSecond?: number }
  | { off: true; maxStartsPerSecond?: number }
  | { maxStartsPerSecond: number }
  | { auto: { minInFlight: number; maxInFlight: number } };

export interface IntegrationLimitView {
  integration: string;
  source: 'own' | 'default';
  limit: IntegrationLimit;
  /** null: no limit. */
  maxInFlight: number | null;
  /** The start rate it keeps to (its own or the default's); null: none. */
  maxStartsPerSecond: number | null;
  inflight: number;
  /** Tasks waiting on the balancers because it is at its limit. */
  waiting: number;
  refused: number | null;
}

export interface LimitsView {
  default: IntegrationLimit;
  clusters: { cluster: string; role: 'baseline' | 'candidate'; capacitySlots: number; integrations: IntegrationLimitView[] }[];
}

/** GET /limits/{cluster}/{integration}/series: one integration per 10-second slot. */
export interface LimitSeriesView {
  cluster: string;
  integration: string;
  slotSeconds: number;
  points: {
    startUnixMs: number;
    /** null: no limit, or not sampled. */
    limitInFlight: number | null;
    /** null: not sampled. */
    inFlight: number | null;
    waiting: number | null;
    refused: number;
    tasks: number;
    p50Ms: number | null;
    p99Ms: number | null;
  }[];
}
