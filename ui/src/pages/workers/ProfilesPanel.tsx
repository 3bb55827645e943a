import { useCallback, useEffect, useState } from 'react';
import type { ProfileRecord } from '../../api/types';
import { ErrorNotice } from '../../components/ErrorNotice';
import { Truncated } from '../../components/Truncated';
import { usePolled } from '../../hooks/usePolled';
import { useSession } from '../../session';
import { formatBytes, formatDateTime, formatMs, formatShare } from '../../format';
import { fetchCpuprofile } from './fetch-cpuprofile';
import { ProfileFlameGraph } from './FlameGraph';

const listedProfiles = 10;

/** Recent CPU profiles; a finished one shows its flame graph and top functions, and can be downloaded. */
export function ProfilesPanel({ refreshKey }: { refreshKey: number }) {
  const { client } = useSession();
  const load = useCallback((signal: AbortSignal) => client.get<{ profiles: ProfileRecord[] }>(`/profiles?limit=${listedProfiles}`, signal), [client]);
  const [anyRunning, setAnyRunning] = useState(false);
  // Quick while one runs, so its result shows as soon as it is done.
  const profiles = usePolled(load, anyRunning ? 1000 : 10_000);
  const [selectedId, setSelectedId] = useState<string>();
  const { refresh } = profiles;
  useEffect(() => {
    if (refreshKey > 0) refresh();
  }, [refreshKey, refresh]);
  const list = profiles.data?.profiles;
  useEffect(() => setAnyRunning(list?.some((p) => p.status === 'running') ?? false), [list]);

  const selected = list?.find((p) => p.profileId === selectedId) ?? list?.[0];
  return (
    <section className="card" aria-labelledby="profiles-title">
      <h2 id="profiles-title">CPU profiles</h2>
      <ErrorNotice error={profiles.error} action="Loading the profiles" />
      {!list ? (
        <p className="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p className="muted">No profile yet: press Profile on a worker.</p>
      ) : (
        <div className="profiles">
          <ul className="profile-list" aria-label="Recent profiles">
            {list.map((profile) => (
              <li key={profile.profileId}>
                <button
                  type="button"
                  className={`profile-item ${profile === selected ? 'profile-item-selected' : ''}`}
                  aria-pressed={profile === selected}
                  onClick={() => setSelectedId(profile.profileId)}
                >
                  <Truncated text={profile.workerId} />
                  <span className={`tag tag-${profile.status === 'done' ? 'ok' : profile.status === 'failed' ? 'warning' : 'info'}`}>{profile.status}</span>
                  <span className="muted">{formatDateTime(profile.startedAtUnixMs)}</span>
                </button>
              </li>
            ))}
          </ul>
          {selected && <ProfileDetail profile={selected} />}
        </div>
      )}
    </section>
  );
}

function ProfileDetail({ profile }: { profile: ProfileRecord }) {
  const { client } = useSession();
  const [downloadError, setDownloadError] = useState<unknown>();
  const download = async () => {
    setDownloadError(undefined);
    try {
      const response = await fetchCpuprofile(client, profile.profileId);
      const name = /filename="([^"]+)"/.exec(response.headers.get('content-disposition') ?? '')?.[1] ?? `${profile.workerId}.cpuprofile`;
      const url = URL.createObjectURL(await response.blob());
      const link = document.createElement('a');
      link.href = url;
      link.download = name;
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (error) {
      setDownloadError(error);
    }
  };
  return (
    <div className="profile-detail">
      <h3>
        <Truncated text={profile.workerId} /> ({profile.cluster}), {profile.durationMs / 1000} s, asked by {profile.actor}
      </h3>
      {profile.status === 'running' && <p role="status">Profiling… done by {formatDateTime(profile.startedAtUnixMs + profile.durationMs)}.</p>}
      {profile.status === 'failed' && (
        <p className="notice notice-error">
          Failed ({profile.error?.code ?? 'unknown'}): {profile.error?.message ?? 'no reason given'}
        </p>
      )}
      {profile.status === 'done' && profile.summary && (
        <>
          <p>
            {formatMs(profile.summary.profiledMs)} sampled ({profile.summary.samples} samples): {formatMs(profile.summary.profiledMs - profile.summary.idleMs)}{' '}
            on the CPU, {formatMs(profile.summary.idleMs)} idle; {formatBytes(profile.cpuprofileBytes)}.{' '}
            <button type="button" className="button-small" onClick={() => void download()}>
              Download .cpuprofile
            </button>
          </p>
          <ErrorNotice error={downloadError} action="Downloading the profile" />
          <ProfileFlameGraph key={profile.profileId} profileId={profile.profileId} />
          <p className="hint">For the samples in time order, open the download in Chrome DevTools (Performance, Load profile…) or speedscope.</p>
          <div className="table-scroll">
            <table className="table">
              <caption>Top functions by self time</caption>
              <thead>
                <tr>
                  <th scope="col">Function</th>
                  <th scope="col">Where</th>
                  <th scope="col" className="numeric">
                    Self time
                  </th>
                  <th scope="col" className="numeric" title="Self time as a share of the CPU time (idle left out), as in the flame graph">
                    Share of CPU
                  </th>
                </tr>
              </thead>
              <tbody>
                {profile.summary.topFunctions.map((fn, i) => (
                  <tr key={i}>
                    <td>
                      <Truncated text={fn.functionName} />
                    </td>
                    <td>
                      <Truncated text={fn.location || '—'} className="location" />
                    </td>
                    <td className="numeric">{formatMs(fn.selfMs)}</td>
                    <td className="numeric">{formatShare(fn.share)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </div>
  );
}
