import type { BalancerView } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { formatAgo } from '../../format';

/** Each live balancer and the override version it applied. */
export function BalancerVersions({ balancers, overrideVersion }: { balancers: BalancerView[] | undefined; overrideVersion: number | undefined }) {
  if (!balancers) return <p className="muted">Loading…</p>;
  if (balancers.length === 0) return <p className="muted">No balancer is running.</p>;
  const now = Date.now();
  return (
    <div className="table-scroll">
      <table className="table">
        <caption className="visually-hidden">Override version applied by each balancer</caption>
        <thead>
          <tr>
            <th scope="col">Balancer</th>
            <th scope="col">Address</th>
            <th scope="col">Applied version</th>
            <th scope="col">Last heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {balancers.map((balancer) => (
            <tr key={balancer.balancerId} className={balancer.upToDate ? undefined : 'row-warning'}>
              <td>
                <Truncated text={balancer.balancerId} />
              </td>
              <td>
                <Truncated text={balancer.address || '—'} />
              </td>
              <td>
                {balancer.ackedVersion ?? '—'}
                {balancer.upToDate ? (
                  <span className="tag tag-ok">current</span>
                ) : (
                  <span className="tag tag-warning">behind{overrideVersion !== undefined ? ` (current ${overrideVersion})` : ''}</span>
                )}
              </td>
              <td>{formatAgo(balancer.lastHeartbeatUnixMs, now)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
