import { isActive, useRollouts } from '../../hooks/useRollouts';
import { Link } from '../../router';
import { Truncated } from '../../components/Truncated';
import { RolloutStatusTag } from '../rollouts/gate-display';
import '../rollouts/rollouts.css';

/** The rollout under way, if one is: where it stands, and the way to its page. */
export function ActiveRollout() {
  const { data } = useRollouts(5000);
  const rollout = data?.current;
  if (!isActive(rollout)) return null;
  const step = rollout.plan.steps[rollout.step];
  return (
    <section className="state-banner rollout-summary" aria-label="Active rollout">
      <p className="rollout-title">
        <span>Rollout</span>
        <strong>
          <Truncated text={rollout.plan.name} />
        </strong>
        <RolloutStatusTag status={rollout.status} />
      </p>
      <p>
        Step {rollout.step + 1} of {rollout.plan.steps.length}
        {step && `: ${step.candidatePercent}% on the candidate at max parallelism ${rollout.maxParallelism}`}
        {rollout.rolledBack.length > 0 && `; rolled back: ${rollout.rolledBack.join(', ')}`}.
      </p>
      {rollout.status === 'running' && rollout.waitingFor && <p className="hint">Waiting for {rollout.waitingFor}.</p>}
      <p>
        <Link to="/rollouts">Open the Rollouts page</Link>
      </p>
    </section>
  );
}
