import type { Rollout } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { formatDateTime } from '../../format';
import { RolloutStatusTag } from './gate-display';

/** Finished rollouts, newest first (the control plane keeps the latest 20). */
export function RolloutHistory({ history }: { history: Rollout[] | undefined }) {
  if (!history) return <p className="muted">Loading…</p>;
  if (history.length === 0) return <p className="muted">No rollout has finished yet.</p>;
  return (
    <div className="table-scroll">
      <table className="table rollout-history">
        <caption className="visually-hidden">Finished rollouts</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Status</th>
            <th scope="col">Reached</th>
            <th scope="col">Rolled back</th>
            <th scope="col">Started</th>
            <th scope="col">Finished</th>
            <th scope="col">Last decision</th>
          </tr>
        </thead>
        <tbody>
          {history.map((rollout) => (
            <tr key={rollout.id}>
              <th scope="row">
                <Truncated text={rollout.plan.name} />
                <span className="hint"> {rollout.id}</span>
              </th>
              <td>
                <RolloutStatusTag status={rollout.status} />
              </td>
              <td className="nowrap">
                step {rollout.step + 1} of {rollout.plan.steps.length}, {rollout.plan.steps[rollout.step]?.candidatePercent ?? '—'}%
              </td>
              <td>{rollout.rolledBack.length > 0 ? rollout.rolledBack.join(', ') : 'none'}</td>
              <td className="nowrap">
                {formatDateTime(rollout.createdAtUnixMs)} by <Truncated text={rollout.createdBy} />
              </td>
              <td className="nowrap">{formatDateTime(rollout.finishedAtUnixMs)}</td>
              <td className="decision-message">{rollout.decisions.at(-1)?.message ?? '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
