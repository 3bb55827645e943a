import { useState } from 'react';
import type { Rollout } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { ErrorNotice } from '../../components/ErrorNotice';
import { useAction } from '../../hooks/useAction';
import { useSession, useWhyReadOnly } from '../../session';

type Action = 'pause' | 'resume' | 'abort';
const acting: Record<Action, string> = { pause: 'Pausing', resume: 'Resuming', abort: 'Aborting' };

/** Pause or resume the autopilot, or end the rollout; the reason goes to the audit log and the decisions. */
export function RolloutControls({ rollout, onChanged }: { rollout: Rollout; onChanged(rollout: Rollout): void }) {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const [reason, setReason] = useState('');
  const [confirmingAbort, setConfirmingAbort] = useState(false);
  const [outcome, run] = useAction<Rollout>();
  const [lastAction, setLastAction] = useState<Action>('pause');
  const busy = outcome.status === 'running';
  const disabled = whyReadOnly !== undefined || busy;

  const perform = (action: Action) => {
    setLastAction(action);
    return run(async () => {
      const changed = await client.send<Rollout>(
        'POST',
        `/rollouts/${encodeURIComponent(rollout.id)}/${action}`,
        reason.trim() ? { reason: reason.trim() } : {},
      );
      // A reason belongs to one change: the next starts blank.
      setReason('');
      onChanged(changed);
      return changed;
    });
  };

  return (
    <section className="card rollout-controls" aria-labelledby="rollout-controls-title">
      <h2 id="rollout-controls-title">Control the autopilot</h2>
      <div className="rollout-control-row">
        <label htmlFor="rollout-reason">Reason (for the audit log)</label>
        <input
          id="rollout-reason"
          type="text"
          maxLength={500}
          value={reason}
          onChange={(event) => setReason(event.target.value)}
          disabled={whyReadOnly !== undefined}
          title={whyReadOnly}
          placeholder="e.g. waiting for the bank-b incident to end"
        />
      </div>
      <div className="form-actions">
        {rollout.status === 'paused' ? (
          <button
            type="button"
            className="button-primary"
            disabled={disabled}
            title={whyReadOnly ?? 'The gates must hold a whole hold again, on windows after now'}
            onClick={() => void perform('resume')}
          >
            Resume
          </button>
        ) : (
          <button
            type="button"
            disabled={disabled}
            title={whyReadOnly ?? 'The autopilot stops acting; traffic and parallelism stay as they are'}
            onClick={() => void perform('pause')}
          >
            Pause
          </button>
        )}
        <button type="button" className="button-danger" disabled={disabled} title={whyReadOnly} onClick={() => setConfirmingAbort(true)}>
          Abort…
        </button>
      </div>
      <p className="hint">Pausing or aborting leaves traffic and parallelism as they are: roll back on the Rollback page if wanted.</p>
      {outcome.status === 'failed' && <ErrorNotice error={outcome.error} action={`${acting[lastAction]} rollout ${rollout.plan.name}`} change />}
      <ConfirmDialog
        open={confirmingAbort}
        title="Abort this rollout?"
        confirmLabel="Abort rollout"
        danger
        onConfirm={() => perform('abort')}
        onClose={() => setConfirmingAbort(false)}
      >
        <p>
          <strong>{rollout.plan.name}</strong> ends at step {rollout.step + 1} of {rollout.plan.steps.length}: the autopilot stops for good. Traffic and the
          candidate&apos;s max parallelism stay as they are now.
          {reason.trim() && ` Reason: ${reason.trim()}`}
        </p>
      </ConfirmDialog>
    </section>
  );
}
