import type { Rollout } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { describeParallelism } from './gate-display';

type StepState = 'done' | 'current' | 'to come' | 'ended here' | 'not reached';

function stateOf(rollout: Rollout, index: number): StepState {
  if (index < rollout.step) return 'done';
  if (index > rollout.step) return rollout.status === 'running' || rollout.status === 'paused' ? 'to come' : 'not reached';
  if (rollout.status === 'completed') return 'done';
  return rollout.status === 'running' || rollout.status === 'paused' ? 'current' : 'ended here';
}

/** The plan's steps in order, each done, current or to come, with the integrations rolled back during it. */
export function StepTimeline({ rollout }: { rollout: Rollout }) {
  const rolledBackAt = new Map<number, string[]>();
  for (const decision of rollout.decisions) {
    if (decision.kind === 'rollback' && decision.integration)
      rolledBackAt.set(decision.step, [...(rolledBackAt.get(decision.step) ?? []), decision.integration]);
  }
  // Rolled back before the decisions kept (the latest 200): shown on the rollout as a whole.
  const unplaced = rollout.rolledBack.filter((name) => ![...rolledBackAt.values()].some((names) => names.includes(name)));
  const steps = rollout.plan.steps;
  return (
    <>
      <ol className="step-timeline" aria-label="Plan steps">
        {steps.map((step, index) => {
          const state = stateOf(rollout, index);
          const current = state === 'current';
          return (
            <li key={index} className={`timeline-step step-${state.replace(' ', '-')}`} aria-current={current ? 'step' : undefined}>
              <p className="timeline-head">
                <strong>Step {index + 1}</strong>
                <span className="step-state">{state}</span>
              </p>
              <p className="timeline-percent">{step.candidatePercent}% on the candidate</p>
              <p>{describeParallelism(step)}</p>
              {current && rollout.search && (
                <p className="hint">
                  trying {rollout.search.current} now; highest held {rollout.search.highestHeld ?? 'none yet'}
                </p>
              )}
              <p className="hint">hold {step.holdSeconds} s</p>
              {(rolledBackAt.get(index) ?? []).map((name) => (
                <p key={name} className="rolled-back-mark">
                  <span aria-hidden="true">↩</span> <Truncated text={name} /> rolled back
                </p>
              ))}
            </li>
          );
        })}
      </ol>
      {unplaced.length > 0 && <p className="rolled-back-mark">Rolled back: {unplaced.join(', ')}</p>}
    </>
  );
}
