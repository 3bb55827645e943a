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
  return (
    <section className={`card cluster-card tone-${cluster.role}`} aria-label={`${cluster.role} cluster ${cluster.name}`}>
      <h3 className="card-title">
        <span className={`cluster-role role-${cluster.role}`}>{cluster.role}</span> {cluster.name}
      </h3>
      <UsageBar used={cluster.inFlight} total={cluster.capacity} label={`${cluster.name}: slots in use`} tone={cluster.role} />
      <p className="bar-caption">
        {formatCount(cluster.inFlight)} of {formatCount(cluster.capacity)} slots in use
      </p>
      <dl className="stats stats-auto">
        <Stat label="Workers" value={formatCount(cluster.workers)} note={cluster.drainingWorkers > 0 ? `${cluster.drainingWorkers} draining` : undefined} />
        <Stat label="Capacity" value={formatCount(cluster.capacity)} />
        <Stat label="In flight" value={formatCount(cluster.inFlight)} />
        <Stat label="Free" value={formatCount(cluster.free)} />
        <Stat label="Tasks" value={formatRate(cluster.tasksPerSecond)} />
        <Stat label="Errors" value={formatRate(cluster.errorsPerSecond)} note={errorShare !== undefined && errorShare > 0 ? `${(errorShare * 100).toFixed(1)}% of tasks` : undefined} />
      </dl>
    </section>
  );
}

function Stat({ label, value, note }: { label: string; value: string; note?: string | undefined }) {
  return (
    <div className="stat">
      <dt>{label}</dt>
      <dd>
        {value}
        {note && <span className="stat-note">{note}</span>}
      </dd>
    </div>
  );
}
