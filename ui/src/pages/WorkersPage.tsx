import { useCallback, useMemo, useState } from 'react';
import type { ProfileRecord, WorkerSummary } from '../api/types';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorNotice } from '../components/ErrorNotice';
import { ReadOnlyNote } from '../components/ReadOnlyNote';
import { Truncated } from '../components/Truncated';
import { useAction } from '../hooks/useAction';
import { usePolled } from '../hooks/usePolled';
import { useRefreshOnChange } from '../hooks/useRefreshOnChange';
import { useLive } from '../live';
import { useSession, useWhyReadOnly } from '../session';
import { ProfilesPanel } from './workers/ProfilesPanel';
import { WorkerTable } from './workers/WorkerTable';

const refreshIntervalMs = 2000;
const profileDurationsMs = [5000, 10_000, 30_000];

type PendingAction = { kind: 'drain'; worker: WorkerSummary } | { kind: 'profile'; worker: WorkerSummary };
type Done = { kind: 'drain'; workerId: string; cluster: string } | { kind: 'profile'; record: ProfileRecord };

/** Every worker with the figures that decide a parallelism step; drain one, or profile its CPU. */
export function WorkersPage() {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const { figures } = useLive();
  const load = useCallback((signal: AbortSignal) => client.get<{ workers: WorkerSummary[] }>('/workers', signal), [client]);
  const workers = usePolled(load, refreshIntervalMs);
  useRefreshOnChange(['worker.drain'], workers.refresh);
  const [clusterFilter, setClusterFilter] = useState('all');
  const [search, setSearch] = useState('');
  const [pending, setPending] = useState<PendingAction | undefined>();
  const [profileDurationMs, setProfileDurationMs] = useState(10_000);
  const [done, run] = useAction<Done>();
  const [profilesVersion, setProfilesVersion] = useState(0);
  const [lastAction, setLastAction] = useState<PendingAction>();

  const all = workers.data?.workers;
  const clusters = useMemo(() => [...new Set((all ?? []).map((w) => w.cluster))].sort(), [all]);
  const shown = useMemo(() => {
    const needle = search.trim().toLowerCase();
    return (all ?? [])
      .filter((w) => (clusterFilter === 'all' || w.cluster === clusterFilter) && (needle === '' || w.workerId.toLowerCase().includes(needle)))
      .sort((a, b) => a.cluster.localeCompare(b.cluster) || a.workerId.localeCompare(b.workerId));
  }, [all, clusterFilter, search]);

  const confirm = () => {
    const action = pending!;
    setLastAction(action);
    return run(async (): Promise<Done> => {
      if (action.kind === 'drain') {
        const answer = await client.send<{ workerId: string; cluster: string }>('POST', `/workers/${encodeURIComponent(action.worker.workerId)}/drain`, {});
        workers.refresh();
        return { kind: 'drain', ...answer };
      }
      const record = await client.send<ProfileRecord>('POST', '/profiles', { workerId: action.worker.workerId, durationMs: profileDurationMs });
      setProfilesVersion((n) => n + 1);
      return { kind: 'profile', record };
    });
  };

  const clusterRoles = figures?.clusters;
  const roleOfCluster = useCallback((cluster: string) => clusterRoles?.find((c) => c.name === cluster)?.role, [clusterRoles]);
  const draining = (all ?? []).filter((w) => w.draining).length;
  return (
    <>
      <h1>Workers</h1>
      <ReadOnlyNote />
      <div className="toolbar">
        <label htmlFor="worker-cluster">Cluster</label>
        <select id="worker-cluster" value={clusterFilter} onChange={(event) => setClusterFilter(event.target.value)}>
          <option value="all">All</option>
          {clusters.map((name) => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
        </select>
        <label htmlFor="worker-search">Find</label>
        <input id="worker-search" type="search" value={search} onChange={(event) => setSearch(event.target.value)} placeholder="worker id" />
        <span className="muted" role="status">
          {all ? `${shown.length} of ${all.length} workers${draining > 0 ? `, ${draining} draining` : ''}` : 'Loading…'}
        </span>
      </div>
      {done.status === 'failed' && (
        <ErrorNotice
          error={done.error}
          action={lastAction?.kind === 'profile' ? `Profiling ${lastAction.worker.workerId}` : `Draining ${lastAction?.worker.workerId ?? ''}`}
          change
        />
      )}
      {done.status === 'done' && done.result.kind === 'drain' && (
        <p className="notice notice-success" role="status">
          Draining <Truncated text={done.result.workerId} /> ({done.result.cluster}): it takes no new task, finishes the ones it runs, then leaves.
        </p>
      )}
      <ErrorNotice error={workers.error} action="Loading the workers" />
      {all && (
        <WorkerTable
          workers={shown}
          roleOfCluster={roleOfCluster}
          whyReadOnly={whyReadOnly}
          onDrain={(worker) => setPending({ kind: 'drain', worker })}
          onProfile={(worker) => setPending({ kind: 'profile', worker })}
        />
      )}
      <ProfilesPanel refreshKey={profilesVersion} />
      <ConfirmDialog
        open={pending !== undefined}
        title={pending?.kind === 'drain' ? 'Drain this worker?' : 'Profile this worker?'}
        confirmLabel={pending?.kind === 'drain' ? 'Drain' : 'Start profiling'}
        danger={pending?.kind === 'drain'}
        onConfirm={confirm}
        onClose={() => setPending(undefined)}
      >
        {pending && (
          <>
            <p>
              <Truncated text={pending.worker.workerId} className="dialog-subject" /> ({pending.worker.cluster}, {pending.worker.inFlight} task
              {pending.worker.inFlight === 1 ? '' : 's'} running)
            </p>
            {pending.kind === 'drain' ? (
              <p>It stops taking tasks, finishes those it runs, and leaves the cluster: capacity drops by {pending.worker.maxParallelism} slots.</p>
            ) : (
              <>
                <p>Samples its CPU with the V8 profiler in its own process; one worker at a time across the fleet.</p>
                <label htmlFor="profile-duration">Duration</label>{' '}
                <select id="profile-duration" value={profileDurationMs} onChange={(event) => setProfileDurationMs(Number(event.target.value))}>
                  {profileDurationsMs.map((ms) => (
                    <option key={ms} value={ms}>
                      {ms / 1000} s
                    </option>
                  ))}
                </select>
              </>
            )}
          </>
        )}
      </ConfirmDialog>
    </>
  );
}
