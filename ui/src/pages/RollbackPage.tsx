import { useCallback, useEffect, useState } from 'react';
import type { OverrideChangeRecord, OverrideState, RollbackRecord, TrafficView } from '../api/types';
import { Acknowledgements } from '../components/Acknowledgements';
import { ConfirmDialog } from '../components/ConfirmDialog';
import { ErrorNotice } from '../components/ErrorNotice';
import { ReadOnlyNote } from '../components/ReadOnlyNote';
import { Truncated } from '../components/Truncated';
import { useAction } from '../hooks/useAction';
import { usePolled } from '../hooks/usePolled';
import { useRefreshOnChange } from '../hooks/useRefreshOnChange';
import { useLive } from '../live';
import { useSession, useWhyReadOnly } from '../session';
import { formatDateTime, formatMs } from '../format';
import { BalancerVersions } from './rollback/BalancerVersions';

/** "all", or one integration. */
type Scope = string;

/** The instant way back: every balancer stops using the candidate at once, and says so. */
export function RollbackPage() {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const { figures, onOverrideChange } = useLive();
  const load = useCallback((signal: AbortSignal) => client.get<TrafficView>('/traffic', signal), [client]);
  const traffic = usePolled(load, 3000);
  const refreshTraffic = traffic.refresh;
  useRefreshOnChange(['traffic.set', 'rollback', 'resume', 'override.rebuild'], refreshTraffic);
  const [scope, setScope] = useState<Scope>('all');
  const [reason, setReason] = useState('');
  const [confirming, setConfirming] = useState<{ kind: 'rollback' | 'resume'; scope: Scope } | undefined>();
  const [outcome, run] = useAction<OverrideChangeRecord>();
  const [lastRequest, setLastRequest] = useState<{ kind: 'rollback' | 'resume'; scope: Scope }>();
  // The answer comes once every balancer has it; whether Unleash has it too comes later, as an event.
  const [durableUpdate, setDurableUpdate] = useState<OverrideChangeRecord>();
  useEffect(
    () =>
      onOverrideChange((record) => {
        if (record.durable === 'pending') return;
        setDurableUpdate(record);
        refreshTraffic();
      }),
    [onOverrideChange, refreshTraffic],
  );
  const answered = outcome.status === 'done' ? outcome.result : undefined;
  const shown = answered && durableUpdate?.overrideVersion === answered.overrideVersion ? durableUpdate : answered;

  const integrations = traffic.data ? Object.keys(traffic.data.flag.integrations) : [];
  const override = figures?.override ?? traffic.data?.override ?? null;
  const allBack = override?.all === true || traffic.data?.flag.enabled === false;
  const integrationsBack = [
    ...new Set([
      ...(override?.integrations ?? []),
      ...Object.entries(traffic.data?.flag.integrations ?? {})
        .filter(([, t]) => t.rolledBack)
        .map(([name]) => name),
    ]),
  ].sort();
  const busy = outcome.status === 'running';

  const perform = (kind: 'rollback' | 'resume', target: Scope) => {
    setLastRequest({ kind, scope: target });
    return run(async () => {
      const body = { ...(target === 'all' ? {} : { integration: target }), ...(reason.trim() ? { reason: reason.trim() } : {}) };
      try {
        const record = await client.send<OverrideChangeRecord>('POST', kind === 'rollback' ? '/rollback' : '/resume', body);
        // A reason belongs to one change: the next starts blank.
        setReason('');
        return record;
      } finally {
        traffic.refresh();
      }
    });
  };

  return (
    <>
      <h1>Rollback</h1>
      <CurrentState
        override={override}
        allBack={allBack}
        integrationsBack={integrationsBack}
        durable={traffic.data?.durable}
        unleashWritesPending={traffic.data?.unleashWritesPending ?? 0}
        lastRollback={traffic.data?.lastRollback ?? null}
      />
      <ReadOnlyNote />
      <section className="card rollback-card" aria-labelledby="rollback-title">
        <h2 id="rollback-title">Roll back</h2>
        <p>
          Balancers stop sending tasks to the candidate cluster at once and acknowledge it; tasks queued for it go to the baseline; tasks already running there
          finish.
        </p>
        <div className="rollback-controls">
          <label htmlFor="rollback-scope">What</label>
          <select id="rollback-scope" value={scope} onChange={(event) => setScope(event.target.value)} disabled={whyReadOnly !== undefined} title={whyReadOnly}>
            <option value="all">All integrations</option>
            {integrations.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
          <label htmlFor="rollback-reason">Reason (for the audit log; a resume takes it too)</label>
          <input
            id="rollback-reason"
            type="text"
            maxLength={500}
            value={reason}
            onChange={(event) => setReason(event.target.value)}
            disabled={whyReadOnly !== undefined}
            title={whyReadOnly}
            placeholder="e.g. p95 ratio 1.8 on bank-a"
          />
        </div>
        <button
          type="button"
          className="button-danger button-big"
          disabled={whyReadOnly !== undefined || busy}
          title={whyReadOnly}
          onClick={() => setConfirming({ kind: 'rollback', scope })}
        >
          {scope === 'all' ? 'Roll back all integrations' : `Roll back ${scope}`}
        </button>
      </section>
      {outcome.status === 'failed' && lastRequest && (
        <ErrorNotice
          error={outcome.error}
          action={`${lastRequest.kind === 'resume' ? 'Resuming' : 'Rolling back'} ${lastRequest.scope === 'all' ? 'all integrations' : lastRequest.scope}`}
          change
        />
      )}
      {shown && <OutcomeView record={shown} />}
      {outcome.status !== 'done' && traffic.data?.lastRollback && <LastRollback record={traffic.data.lastRollback} />}
      <section className="card" aria-labelledby="resume-title">
        <h2 id="resume-title">Resume</h2>
        <p>Sends traffic to the candidate cluster again, at the shares set on the Traffic page.</p>
        {!allBack && integrationsBack.length === 0 ? (
          <p className="muted">Nothing is rolled back.</p>
        ) : (
          <div className="resume-actions">
            {allBack ? (
              <button
                type="button"
                disabled={whyReadOnly !== undefined || busy}
                title={whyReadOnly}
                onClick={() => setConfirming({ kind: 'resume', scope: 'all' })}
              >
                Resume all integrations
              </button>
            ) : (
              integrationsBack.map((name) => (
                <button
                  key={name}
                  type="button"
                  disabled={whyReadOnly !== undefined || busy}
                  title={whyReadOnly}
                  onClick={() => setConfirming({ kind: 'resume', scope: name })}
                >
                  Resume <Truncated text={name} />
                </button>
              ))
            )}
            {allBack && integrationsBack.length > 0 && (
              <p className="muted">Also rolled back on their own, and still so after resuming all: {integrationsBack.join(', ')}.</p>
            )}
          </div>
        )}
      </section>
      <section className="card" aria-labelledby="balancers-title">
        <h2 id="balancers-title">Balancers</h2>
        <BalancerVersions balancers={figures?.balancers ?? traffic.data?.balancers} overrideVersion={override?.version} />
      </section>
      <ErrorNotice error={traffic.error} action="Loading the rollback state" />
      <ConfirmDialog
        open={confirming !== undefined}
        title={confirming?.kind === 'resume' ? 'Resume traffic to the candidate?' : 'Roll back to the baseline cluster?'}
        confirmLabel={confirming?.kind === 'resume' ? 'Resume' : 'Roll back now'}
        danger={confirming?.kind === 'rollback'}
        onConfirm={() => perform(confirming!.kind, confirming!.scope)}
        onClose={() => setConfirming(undefined)}
      >
        {confirming?.kind === 'resume' ? (
          <p>
            {confirming.scope === 'all' ? 'Every integration' : <Truncated text={confirming.scope} />} goes back to the candidate cluster at its configured
            share.
            {reason.trim() && ` Reason: ${reason.trim()}`}
          </p>
        ) : (
          <p>
            {confirming?.scope === 'all' ? 'Every integration' : <Truncated text={confirming?.scope ?? ''} />} goes to the baseline cluster now, on every
            balancer.
            {reason.trim() && ` Reason: ${reason.trim()}`}
          </p>
        )}
      </ConfirmDialog>
    </>
  );
}

function CurrentState(props: {
  override: OverrideState | null;
  allBack: boolean;
  integrationsBack: string[];
  durable: boolean | undefined;
  unleashWritesPending: number;
  lastRollback: RollbackRecord | null;
}) {
  const { override, allBack, integrationsBack, lastRollback } = props;
  const since = override && override.version > 0 ? ` since ${formatDateTime(override.updatedAtUnixMs)}${override.actor ? ` (${override.actor})` : ''}` : '';
  const rolledBack = allBack || integrationsBack.length > 0;
  // The reason of the rollback that put the override where it is (a later resume replaces it).
  const reason = rolledBack && lastRollback?.reason && lastRollback.overrideVersion === override?.version ? lastRollback.reason : undefined;
  return (
    <div className={`state-banner ${rolledBack ? 'state-back' : 'state-normal'}`} role="status">
      {allBack ? (
        <strong>Everything is rolled back to the baseline{since}.</strong>
      ) : integrationsBack.length > 0 ? (
        <strong>
          Rolled back: {integrationsBack.join(', ')}
          {since}.
        </strong>
      ) : (
        <strong>Nothing is rolled back.</strong>
      )}
      {reason && (
        <span className="state-reason">
          {' '}
          Reason: <Truncated text={reason} />
        </span>
      )}
      {override && <span className="muted"> Override version {override.version}.</span>}
      {props.durable === false &&
        (props.unleashWritesPending > 0 ? (
          <span className="tag tag-info">being written to Unleash</span>
        ) : (
          <span className="tag tag-warning">not durable: Unleash does not agree with the override; roll back again</span>
        ))}
    </div>
  );
}

function DurableNote({ record }: { record: OverrideChangeRecord }) {
  if (record.durable === 'pending') return <p>Every balancer has it. Writing it to Unleash, so that it survives a loss of Redis data…</p>;
  if (record.durable === 'done') {
    return (
      <p>
        Durable:{' '}
        {record.kind === 'rollback'
          ? 'the flag is switched off in Unleash too'
          : 'the flag is switched on in Unleash too; balancers follow it within their next poll'}
        .
      </p>
    );
  }
  return <p>Not durable: {record.durableError}</p>;
}

function OutcomeView({ record }: { record: OverrideChangeRecord }) {
  const scope = record.scope === 'all' ? 'all integrations' : record.scope;
  const what = record.kind === 'rollback' ? 'Rolled back' : 'Resumed';
  return (
    <section
      className={`notice ${record.durable === 'failed' ? 'notice-warning' : 'notice-success'}`}
      aria-label={record.kind === 'rollback' ? 'Rollback result' : 'Resume result'}
    >
      <p className="notice-title">
        {what} {scope}: override version {record.overrideVersion}, propagation {formatMs(record.propagationMs)}
      </p>
      {record.reason && (
        <p>
          Reason: <Truncated text={record.reason} />
        </p>
      )}
      <Acknowledgements
        acknowledged={record.acknowledged}
        missing={record.missing}
        propagationMs={record.propagationMs}
        caption={`Acknowledgements of the ${record.kind}`}
      />
      <DurableNote record={record} />
    </section>
  );
}

function LastRollback({ record }: { record: RollbackRecord }) {
  return (
    <section className="card" aria-label="Last rollback">
      <h2>
        Last rollback: {record.scope === 'all' ? 'all integrations' : record.scope}, {formatDateTime(record.atUnixMs)} by {record.actor}
      </h2>
      {record.reason && (
        <p>
          Reason: <Truncated text={record.reason} />
        </p>
      )}
      <Acknowledgements
        acknowledged={record.acknowledged}
        missing={record.missing}
        propagationMs={record.propagationMs}
        caption="Acknowledgements of the last rollback"
      />
      <DurableNote record={record} />
    </section>
  );
}
