import type { RolloutDecision } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { Link } from '../../router';
import { formatDateTime } from '../../format';

/** The rollout's decisions, newest first: the autopilot's and the operators'. */
export function DecisionLog({ decisions }: { decisions: RolloutDecision[] }) {
  const newestFirst = [...decisions].reverse();
  return (
    <>
      <div className="table-scroll">
        <table className="table decision-log">
          <caption>Decisions, newest first ({decisions.length})</caption>
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col" className="numeric">
                Step
              </th>
              <th scope="col">Kind</th>
              <th scope="col">Who</th>
              <th scope="col">What</th>
            </tr>
          </thead>
          <tbody>
            {newestFirst.map((decision, index) => (
              <tr
                key={`${decision.atUnixMs}-${decisions.length - index}`}
                className={decision.kind === 'rollback' || decision.kind === 'back-off' || decision.kind === 'abort' ? 'row-warning' : undefined}
              >
                <td className="nowrap">{formatDateTime(decision.atUnixMs)}</td>
                <td className="numeric">{decision.step + 1}</td>
                <td>
                  <span className={`decision-kind kind-${decision.kind}`}>{decision.kind}</span>
                </td>
                <td>
                  <Truncated text={decision.actor} />
                </td>
                <td className="decision-message">
                  {decision.integration && <strong>{decision.integration}: </strong>}
                  {decision.message}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <p className="hint">
        The latest 200 are kept here; the <Link to="/audit">audit log</Link> keeps every one, with the gates' figures each was taken on.
      </p>
    </>
  );
}
