import type { Acknowledgement } from '../api/types';
import { formatMs } from '../format';
import { Truncated } from './Truncated';

/** Which balancer applied an override version, and how long after the request. */
export function Acknowledgements(props: { acknowledged: Acknowledgement[]; missing: string[]; propagationMs: number | null; caption: string }) {
  const { acknowledged, missing, propagationMs } = props;
  const everyBalancer = missing.length === 0;
  return (
    <div className="acks">
      <p className="acks-summary">
        {acknowledged.length === 0 && missing.length === 0
          ? 'No balancer was running: each one that starts reads the override before it routes a task.'
          : everyBalancer
            ? `Every balancer has it: ${acknowledged.length} acknowledged, the last after ${formatMs(propagationMs)}.`
            : `${acknowledged.length} of ${acknowledged.length + missing.length} balancers acknowledged; ${missing.length} did not answer in time.`}
      </p>
      {(acknowledged.length > 0 || missing.length > 0) && (
        <div className="table-scroll">
          <table className="table">
            <caption>{props.caption}</caption>
            <thead>
              <tr>
                <th scope="col">Balancer</th>
                <th scope="col">Address</th>
                <th scope="col">Version applied</th>
                <th scope="col" className="numeric">
                  Acknowledged after
                </th>
              </tr>
            </thead>
            <tbody>
              {acknowledged.map((ack) => (
                <tr key={ack.balancerId}>
                  <td>
                    <Truncated text={ack.balancerId} />
                  </td>
                  <td>
                    <Truncated text={ack.address || '—'} />
                  </td>
                  <td>{ack.version}</td>
                  <td className="numeric">{formatMs(ack.ackMs)}</td>
                </tr>
              ))}
              {missing.map((balancerId) => (
                <tr key={balancerId} className="row-warning">
                  <td>
                    <Truncated text={balancerId} />
                  </td>
                  <td>—</td>
                  <td>not acknowledged</td>
                  <td className="numeric">—</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
