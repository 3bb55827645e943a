import type { ClusterSummary } from '../../api/types';
import { UsageBar } from '../../components/UsageBar';
import { formatCount, formatRate } from '../../format';

/** Both clusters side by side: workers, slots, and what they get done. */
export function ClusterCards({ clusters }: { clusters: ClusterSummary[] | undefined }) {
  if (!clusters) return <p className="muted">Waiting for the first figures…</p>;
  return (
    <div className="cluster-cards">
      {clusters.map((cluster) => (
        <ClusterCard key={cluster.name} cluster={cluster} />
      ))}
    </div>
  );
}

function ClusterCard({ cluster }: { cluster: ClusterSummary }) {
  const errorShare = cluster.tasksPerSecond && cluster.errorsPerSecond !== undefined ? cluster.errorsPerSecond / cluster.tasksPerSecond : undefined;
  const drift = cluster.ledgerDriftSlots;
  return (
    <section className={`card cluster-card tone-${cluster.role}`} aria-label={`${cluster.role} cluster ${cluster.name}`}>
      <h3 className="card-title">
        <span className={`cluster-role role-${cluster.role}`}>{cluster.role}</span> {cluster.name}
      </h3>
      <UsageBar used={cluster.inFlight} total={cluster.capacity} label={`${cluster.name}: slots in use`} tone={cluster.role} />
      <SlotsCaption cluster={cluster} />
      <dl className="stats stats-auto">
        <Stat label="Workers" value={formatCount(cluster.workers)} note={cluster.drainingWorkers > 0 ? `${cluster.drainingWorkers} draining` : undefined} />
        <Stat label="Capacity" value={formatCount(cluster.capacity)} />
        <Stat label="In flight" value={formatCount(cluster.inFlight)} note={drift ? `workers run ${formatCount(cluster.heldByWorkers)}` : undefined} />
        <FreeStat cluster={cluster} />
        <Stat label="Tasks" value={formatRate(cluster.tasksPerSecond)} />
        <Stat
          label="Errors"
          value={formatRate(cluster.errorsPerSecond)}
          note={errorShare !== undefined && errorShare > 0 ? `${(errorShare * 100).toFixed(1)}% of tasks` : undefined}
        />
      </dl>
      <BalancerErrorsNote cluster={cluster} />
    </section>
  );
}

/**
 * "N of M slots in use", and why when N is more than M: the ledger counts slots the workers do
 * not run (drift, corrected by their next heartbeats), or the workers do run more (tasks on
 * draining or unreachable workers, whose slots are not in the capacity, or above a lowered max
 * parallelism). More in use than exist is never shown without a reason.
 */
function SlotsCaption({ cluster }: { cluster: ClusterSummary }) {
  const over = cluster.inFlight - cluster.capacity;
  const drift = cluster.ledgerDriftSlots;
  const reasons: string[] = [];
  if (over > 0 && drift === undefined) {
    reasons.push(
      'more than the capacity: the ledger counts slots the workers do not run, or they run tasks beyond it (draining or unreachable workers, a lowered max parallelism)',
    );
  } else if (over > 0 && drift !== undefined) {
    if (drift > 0) reasons.push(`the ledger counts ${formatCount(drift)} more than the workers run (ledger drift); it corrects at their next heartbeats`);
    const run = over - Math.max(0, drift);
    if (run > 0)
      reasons.push(
        `the workers run ${formatCount(run)} more than the capacity: tasks on draining or unreachable workers, or above a lowered max parallelism, that finish first`,
      );
  }
  return (
    <p className={`bar-caption${reasons.length > 0 ? ' bar-caption-warning' : ''}`}>
      {formatCount(cluster.inFlight)} of {formatCount(cluster.capacity)} slots in use{reasons.length > 0 && ` — ${reasons.join('; ')}`}
    </p>
  );
}

/**
 * Free slots while balancers wait for this cluster: the ledger keeps a share of the capacity for
 * user-present tasks, so background tasks wait beside a free slot. Said here, or the operator
 * reads "Free 1" next to a queue of background tasks as a bug.
 */
function FreeStat({ cluster }: { cluster: ClusterSummary }) {
  const keptForUserPresent = cluster.free > 0 && cluster.waitingBalancers > 0;
  const why =
    'Each balancer keeps a share of the capacity for user-present tasks (--kept-for-user-present-share, 10% by default, rounded up; never every slot). ' +
    'Background tasks wait while only those slots are free; a user-present task takes one at once.';
  return <Stat label="Free" value={formatCount(cluster.free)} note={keptForUserPresent ? 'kept for user-present' : undefined} title={why} />;
}

/** Errors no worker counted: tasks the balancers failed before any worker ran them, the most first. */
function BalancerErrorsNote({ cluster }: { cluster: ClusterSummary }) {
  const perSecond = cluster.balancerErrorsPerSecond;
  if (!perSecond) return null;
  const entries = cluster.balancerErrors ?? [];
  const shown = entries.slice(0, 3).map((entry) => `${entry.integration} ${entry.code} ${formatRate(entry.perSecond)}`);
  if (entries.length > shown.length) shown.push(`${entries.length - shown.length} more`);
  return (
    <p className="card-warning balancer-errors">
      {formatRate(perSecond)} of the errors failed in the balancers before any worker ran them{shown.length > 0 && `: ${shown.join(', ')}`}
    </p>
  );
}

function Stat({ label, value, note, title }: { label: string; value: string; note?: string | undefined; title?: string }) {
  return (
    <div className="stat" title={title}>
      <dt>{label}</dt>
      <dd>
        {value}
        {note && <span className="stat-note">{note}</span>}
      </dd>
    </div>
  );
}
