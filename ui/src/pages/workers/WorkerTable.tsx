import type { WorkerSummary } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { UsageBar } from '../../components/UsageBar';
import { formatAgo, formatBytes, formatMs, formatRate, formatShare } from '../../format';

interface Actions {
  /** Colours the slot bars like the cluster cards. */
  roleOfCluster(cluster: string): 'baseline' | 'candidate' | undefined;
  whyReadOnly: string | undefined;
  onDrain(worker: WorkerSummary): void;
  onProfile(worker: WorkerSummary): void;
}

/** One row per worker; wide, so it scrolls sideways in a narrow window. */
export function WorkerTable({ workers, ...actions }: { workers: WorkerSummary[] } & Actions) {
  const now = Date.now();
  return (
    <div className="table-scroll">
      <table className="table worker-table">
        <caption className="visually-hidden">Workers</caption>
        <thead>
          <tr>
            <th scope="col">Worker</th>
            <th scope="col">Cluster</th>
            <th scope="col">Slots used / max</th>
            <th scope="col" className="numeric">
              Heap used / limit
            </th>
            <th scope="col" className="numeric" title="Share of wall time spent in garbage collection">
              GC time
            </th>
            <th scope="col" className="numeric" title="Event-loop utilisation">
              Event loop
            </th>
            <th scope="col" className="numeric" title="Event-loop delay, p99">
              Loop delay p99
            </th>
            <th scope="col" className="numeric">
              Latency p50 / p99
            </th>
            <th scope="col" className="numeric">
              Tasks
            </th>
            <th scope="col" className="numeric">
              Errors
            </th>
            <th scope="col">Heartbeat</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {workers.length === 0 ? (
            <tr>
              <td colSpan={12} className="muted">
                No worker matches.
              </td>
            </tr>
          ) : (
            workers.map((worker) => <WorkerRow key={`${worker.cluster}/${worker.workerId}`} worker={worker} nowUnixMs={now} {...actions} />)
          )}
        </tbody>
      </table>
    </div>
  );
}

/** The worker takes fewer tasks until it recovers (worker option protectEventLoopDelayP99Ms / protectHeapShare). */
function SelfProtectionTag({ protection }: { protection: NonNullable<WorkerSummary['stats']>['selfProtection'] & object }) {
  const what =
    protection.reason === 'heap'
      ? `its heap is at ${formatShare(protection.figure)} of the limit (line ${formatShare(protection.line)})`
      : `its event-loop delay p99 was ${formatMs(protection.figure)} (line ${formatMs(protection.line)})`;
  return (
    <span
      className="tag tag-warning"
      title={`Self-protection since ${new Date(protection.sinceUnixMs).toLocaleTimeString()}: ${what}; it advertises ${formatShare(protection.slotShare)} of its slots until it is back below 80% of the line`}
    >
      {protection.reason === 'heap' ? 'heap high' : 'loop stalled'}: {formatShare(protection.slotShare, 0)} of slots
    </span>
  );
}

/**
 * The ledger counts more (or fewer) slots in use on the worker than it held at its last heartbeat.
 * A few are tasks on their way; more is the ledger's error, which its next heartbeats correct.
 */
function LedgerDriftTag({ worker, nowUnixMs }: { worker: WorkerSummary; nowUnixMs: number }) {
  const drift = worker.ledgerDriftSlots;
  if (!drift) return null;
  const title =
    `The ledger counts ${worker.inFlight} slots in use on this worker; it held ${worker.heldAtHeartbeat ?? '?'} tasks at its last heartbeat (${formatAgo(worker.lastHeartbeatUnixMs, nowUnixMs)}). ` +
    'Tasks on their way to it, or answered with their release on the way back, account for a few; the rest is an error of the ledger, which its next heartbeats correct.';
  return (
    <span className="tag tag-warning" title={title}>
      ledger drift {drift > 0 ? '+' : '−'}
      {Math.abs(drift)}
    </span>
  );
}

/** Why balancers skip the worker, and until when. */
function EjectedTag({ worker, untilUnixMs }: { worker: WorkerSummary; untilUnixMs: number }) {
  const until = new Date(untilUnixMs).toLocaleTimeString();
  if (worker.ejectedReason === 'failing') {
    return (
      <span
        className="tag tag-warning"
        title={`${worker.workerId} failed far more tasks than the other workers on the same integration: no balancer sends it a task until ${until}, when its back-off ends`}
      >
        failing
      </span>
    );
  }
  return (
    <span
      className="tag tag-warning"
      title={`Balancers could not connect to ${worker.address}: none sends it a task until ${until}, or until a health check passes`}
    >
      unreachable
    </span>
  );
}

function WorkerRow({ worker, nowUnixMs, roleOfCluster, whyReadOnly, onDrain, onProfile }: { worker: WorkerSummary; nowUnixMs: number } & Actions) {
  const stats = worker.stats ?? undefined;
  // The ledger's count, even past the max: the drift tag says why it is more than the worker runs.
  const used = worker.inFlight;
  const unreachable = worker.unreachableUntilUnixMs !== null;
  return (
    <tr className={worker.draining || unreachable ? 'row-muted' : undefined}>
      <th scope="row" className="worker-id">
        <Truncated text={worker.workerId} />
        <Truncated text={worker.address} className="worker-address" />
        {worker.draining && <span className="tag tag-warning">draining</span>}
        {stats?.selfProtection && <SelfProtectionTag protection={stats.selfProtection} />}
        {worker.unreachableUntilUnixMs !== null && <EjectedTag worker={worker} untilUnixMs={worker.unreachableUntilUnixMs} />}
        <LedgerDriftTag worker={worker} nowUnixMs={nowUnixMs} />
      </th>
      <td>{worker.cluster}</td>
      <td>
        <div className="slots">
          <UsageBar used={used} total={worker.maxParallelism} label={`${worker.workerId}: slots in use`} tone={roleOfCluster(worker.cluster) ?? 'neutral'} />
          <span>
            {used} / {worker.maxParallelism}
          </span>
        </div>
      </td>
      <td className="numeric">
        {formatBytes(stats?.heapUsedBytes)} / {formatBytes(stats?.heapLimitBytes)}
      </td>
      <td className="numeric">{formatShare(stats?.gcTimeRatio)}</td>
      <td className="numeric">{formatShare(stats?.eventLoopUtilization, 0)}</td>
      <td className="numeric">{formatMs(stats?.eventLoopDelayP99Ms)}</td>
      <td className="numeric">
        {formatMs(stats?.latencyP50Ms)} / {formatMs(stats?.latencyP99Ms)}
      </td>
      <td className="numeric">{formatRate(stats?.tasksPerSecond)}</td>
      <td className="numeric">{formatRate(stats?.errorsPerSecond)}</td>
      <td>{formatAgo(worker.lastHeartbeatUnixMs, nowUnixMs)}</td>
      <td>
        <div className="row-actions">
          <button
            type="button"
            className="button-small"
            disabled={whyReadOnly !== undefined || worker.draining}
            title={whyReadOnly ?? (worker.draining ? 'Already draining' : undefined)}
            onClick={() => onDrain(worker)}
            aria-label={`Drain ${worker.workerId}`}
          >
            Drain
          </button>
          <button
            type="button"
            className="button-small"
            disabled={whyReadOnly !== undefined}
            title={whyReadOnly}
            onClick={() => onProfile(worker)}
            aria-label={`Profile ${worker.workerId}`}
          >
            Profile
          </button>
        </div>
      </td>
    </tr>
  );
}
