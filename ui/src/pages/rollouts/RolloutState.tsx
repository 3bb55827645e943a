import type { Rollout } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { formatDateTime, formatTime } from '../../format';
import { RolloutStatusTag, describeParallelism } from './gate-display';

/** Where the rollout stands: its status, its step, and what the autopilot waits for. */
export function RolloutState({ rollout, actingHere }: { rollout: Rollout; actingHere: boolean }) {
  const step = rollout.plan.steps[rollout.step];
  return (
    // A region, not a live status: what it waits for changes at every tick, too often to be read out.
    <section className={`state-banner rollout-banner rollout-banner-${rollout.status}`} aria-label="Rollout state">
      <p className="rollout-title">
        <strong>
          <Truncated text={rollout.plan.name} />
        </strong>
        <RolloutStatusTag status={rollout.status} />
        <span className="hint">{rollout.id}</span>
      </p>
      <p>
        Step <strong>{rollout.step + 1}</strong> of {rollout.plan.steps.length}
        {step && `: ${step.candidatePercent}% of ${rollout.plan.integrations.join(', ')} on the candidate`}, max parallelism {rollout.maxParallelism} now
        {step?.search && ` (${describeParallelism(step)})`}; since {formatTime(rollout.stepStartedAtUnixMs)}.
      </p>
      {rollout.status === 'running' && (
        <p className="waiting-for">
          <span className="label">Waiting for:</span>{' '}
          {rollout.waitingFor ?? "the autopilot's next reading of the gates (a step, a raise or a resume has just taken effect)"}
          {rollout.heldSinceUnixMs !== null && <span className="muted"> (every gate has held since {formatTime(rollout.heldSinceUnixMs)})</span>}
        </p>
      )}
      {rollout.status === 'paused' && (
        <p className="waiting-for">Paused: the autopilot does not act until it is resumed; traffic and parallelism stay as they are.</p>
      )}
      {rollout.baselineUntilUnixMs !== null && (
        <p className="hint">
          Every task of the plan runs on the candidate: its gates compare with the baseline&apos;s window that ended at{' '}
          {formatTime(rollout.baselineUntilUnixMs)}.
        </p>
      )}
      <p className="hint">
        Started {formatDateTime(rollout.createdAtUnixMs)} by {rollout.createdBy}
        {rollout.finishedAtUnixMs !== null && `; finished ${formatDateTime(rollout.finishedAtUnixMs)}`}
        {rollout.status === 'running' &&
          (actingHere ? "; this control plane's autopilot acts on it" : '; the autopilot of another control plane acts on it (or takes it at its next tick)')}
        .
      </p>
    </section>
  );
}
