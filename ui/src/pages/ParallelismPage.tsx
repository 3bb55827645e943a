import { useCallback, useState } from 'react';
import type { ClusterSummary, ParallelismByCluster } from '../api/types';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorNotice } from '../components/ErrorNotice';
import { ReadOnlyNote } from '../components/ReadOnlyNote';
import { UsageBar } from '../components/UsageBar';
import { useAction } from '../hooks/useAction';
import { usePolled } from '../hooks/usePolled';
import { useRefreshOnChange } from '../hooks/useRefreshOnChange';
import { useLive } from '../live';
import { useSession, useWhyReadOnly } from '../session';
import { formatCount, formatTime } from '../format';

/** The API's bound (flags' maxParallelismLimit). */
const maxParallelismLimit = 10_000;

/** A cluster's setting: a number per worker, or null for each worker's own --max-parallelism. */
type Setting = number | null;

interface PlannedChange {
  cluster: string;
  from: Setting;
  to: Setting;
  workers: number | undefined;
  capacityBefore: number | undefined;
}

const describe = (setting: Setting) => (setting === null ? "the workers' own setting" : `${setting} per worker`);

/** Max parallelism per cluster, through the Unleash flag workers read without a restart. */
export function ParallelismPage() {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const { figures } = useLive();
  const load = useCallback((signal: AbortSignal) => client.get<{ clusters: ParallelismByCluster }>('/parallelism', signal), [client]);
  const parallelism = usePolled(load, 5000);
  useRefreshOnChange(['parallelism.set'], parallelism.refresh);
  const [planned, setPlanned] = useState<PlannedChange | undefined>();
  const [applied, apply] = useAction<PlannedChange>();

  const settings = parallelism.data?.clusters;
  const clusterNames = settings ? Object.keys(settings) : (figures?.clusters.map((c) => c.name) ?? []);

  const confirm = () =>
    apply(async () => {
      const change = planned!;
      const answer = await client
        .send<{ clusters: ParallelismByCluster }>('PUT', '/parallelism', { clusters: { [change.cluster]: change.to } })
        .catch((error: unknown) => {
          parallelism.refresh();
          throw error;
        });
      parallelism.set(answer);
      return change;
    });

  return (
    <>
      <h1>Parallelism</h1>
      <p className="lead">
        Tasks each worker of a cluster may run at once. Workers pick a change up from Unleash within about a second, without a restart: raising frees slots at
        once, lowering lets running tasks finish. It is set per cluster (the flag has no per-integration setting).
      </p>
      <ReadOnlyNote />
      {parallelism.error !== undefined && <ErrorNotice error={parallelism.error} action="Loading the parallelism" />}
      <div className="cluster-cards">
        {clusterNames.map((name) => (
          <ClusterParallelism
            key={name}
            name={name}
            setting={settings ? (settings[name] ?? null) : undefined}
            cluster={figures?.clusters.find((c) => c.name === name)}
            whyReadOnly={whyReadOnly}
            onReview={(to) => {
              const cluster = figures?.clusters.find((c) => c.name === name);
              setPlanned({ cluster: name, from: settings?.[name] ?? null, to, workers: cluster?.workers, capacityBefore: cluster?.capacity });
            }}
          />
        ))}
      </div>
      {applied.status === 'failed' && <ErrorNotice error={applied.error} action="Changing the parallelism" change />}
      {applied.status === 'done' && (
        <AppliedChange change={applied.result} atUnixMs={applied.atUnixMs} cluster={figures?.clusters.find((c) => c.name === applied.result.cluster)} />
      )}
      <ConfirmDialog
        open={planned !== undefined}
        title="Change max parallelism?"
        confirmLabel="Apply"
        onConfirm={confirm}
        onClose={() => setPlanned(undefined)}
      >
        {planned && (
          <>
            <p>
              <strong>{planned.cluster}</strong>: from {describe(planned.from)} to {describe(planned.to)}.
            </p>
            {planned.to !== null && planned.workers !== undefined && (
              <p>
                Capacity: from {formatCount(planned.capacityBefore)} to {formatCount(planned.to * planned.workers)} slots on {planned.workers} worker
                {planned.workers === 1 ? '' : 's'}.
              </p>
            )}
          </>
        )}
      </ConfirmDialog>
    </>
  );
}

function ClusterParallelism(props: {
  name: string;
  setting: Setting | undefined;
  cluster: ClusterSummary | undefined;
  whyReadOnly: string | undefined;
  onReview(to: Setting): void;
}) {
  const { name, setting, cluster, whyReadOnly } = props;
  const [draft, setDraft] = useState('');
  const [useOwn, setUseOwn] = useState(false);
  const inputId = `parallelism-${name.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const value = Number(draft);
  const valid = useOwn || (draft !== '' && Number.isInteger(value) && value >= 1 && value <= maxParallelismLimit);
  const target: Setting = useOwn ? null : value;
  const unchanged = setting !== undefined && target === setting;
  const problem = !useOwn && draft !== '' && !valid ? `Enter a whole number from 1 to ${maxParallelismLimit}.` : undefined;
  return (
    <section className={`card cluster-card tone-${cluster?.role ?? 'neutral'}`} aria-label={`Parallelism of ${name}`}>
      <h2 className="card-title">{name}</h2>
      <p>
        Max parallelism: <strong>{setting === undefined ? '—' : setting === null ? "workers' own" : `${setting} per worker`}</strong>
      </p>
      {cluster && <UsageBar used={cluster.inFlight} total={cluster.capacity} label={`${name}: slots in use`} tone={cluster.role} />}
      <dl className="stats stats-three">
        <div className="stat">
          <dt>Workers</dt>
          <dd>{formatCount(cluster?.workers)}</dd>
        </div>
        <div className="stat">
          <dt>Capacity</dt>
          <dd data-testid={`capacity-${name}`}>{formatCount(cluster?.capacity)}</dd>
        </div>
        <div className="stat">
          <dt>In flight</dt>
          <dd>{formatCount(cluster?.inFlight)}</dd>
        </div>
      </dl>
      <form
        className="parallelism-form"
        onSubmit={(event) => {
          event.preventDefault();
          if (valid && !unchanged && !whyReadOnly) props.onReview(target);
        }}
      >
        <label htmlFor={inputId}>New max parallelism per worker</label>
        <input
          id={inputId}
          type="number"
          min={1}
          max={maxParallelismLimit}
          step={1}
          value={draft}
          disabled={whyReadOnly !== undefined || useOwn}
          title={whyReadOnly}
          aria-invalid={problem !== undefined}
          aria-describedby={problem ? `${inputId}-problem` : undefined}
          onChange={(event) => setDraft(event.target.value)}
        />
        <label className="checkbox">
          <input
            type="checkbox"
            checked={useOwn}
            disabled={whyReadOnly !== undefined}
            title={whyReadOnly}
            onChange={(event) => setUseOwn(event.target.checked)}
          />
          Use each worker&apos;s own setting
        </label>
        {problem && (
          <p id={`${inputId}-problem`} className="field-problem">
            {problem}
          </p>
        )}
        <button
          type="submit"
          className="button-primary"
          disabled={whyReadOnly !== undefined || !valid || unchanged}
          title={whyReadOnly ?? (unchanged ? 'That is the current setting' : undefined)}
        >
          Review change…
        </button>
      </form>
    </section>
  );
}

/** The change as the workers take it up: capacity, live, against what it should become. */
function AppliedChange({ change, atUnixMs, cluster }: { change: PlannedChange; atUnixMs: number; cluster: ClusterSummary | undefined }) {
  const expected = change.to !== null && cluster ? change.to * cluster.workers : undefined;
  const reached = expected !== undefined && cluster?.capacity === expected;
  return (
    <section className="notice notice-success" role="status" aria-label="Parallelism change">
      <p className="notice-title">
        Applied in Unleash at {formatTime(atUnixMs)}: {change.cluster} from {describe(change.from)} to {describe(change.to)}.
      </p>
      <p>
        Capacity of {change.cluster} now: <strong>{formatCount(cluster?.capacity)}</strong>
        {expected !== undefined &&
          (reached
            ? ` slots, as expected (${cluster?.workers} × ${change.to}).`
            : ` slots; ${formatCount(expected)} once every worker has picked the change up.`)}
      </p>
    </section>
  );
}
