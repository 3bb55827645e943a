import type { BalancerView } from '../../api/types';
import { Truncated } from '../../components/Truncated';
import { UsageBar } from '../../components/UsageBar';
import { formatCount } from '../../format';

/** Tasks waiting for a slot, by priority, over all balancers and at each. */
export function QueueDepths({ balancers }: { balancers: BalancerView[] | undefined }) {
  if (!balancers) return <p className="muted">Waiting for the first figures…</p>;
  if (balancers.length === 0) return <p className="muted">No balancer is running.</p>;
  const reporting = balancers.filter((b) => b.queued);
  const total = (pick: 'userPresent' | 'background') => (reporting.length === 0 ? undefined : reporting.reduce((sum, b) => sum + b.queued![pick], 0));
  const userPresent = total('userPresent');
  const background = total('background');
  const scale = Math.max(10, ...reporting.map((b) => b.queued!.userPresent + b.queued!.background));
  return (
    <div className="queues">
      <dl className="stats stats-two">
        <div className="stat">
          <dt>
            <span className="swatch swatch-user-present" aria-hidden="true" /> User present
          </dt>
          <dd>{formatCount(userPresent)}</dd>
        </div>
        <div className="stat">
          <dt>
            <span className="swatch swatch-background" aria-hidden="true" /> Background
          </dt>
          <dd>{formatCount(background)}</dd>
        </div>
      </dl>
      <ul className="queue-list" aria-label="Queued tasks at each balancer">
        {balancers.map((balancer) => (
          <li key={balancer.balancerId} className="queue-row">
            <Truncated text={balancer.balancerId} className="queue-name" />
            {balancer.queued ? (
              <>
                <UsageBar used={balancer.queued.userPresent} total={scale} label={`${balancer.balancerId}: user-present tasks waiting`} tone="user-present" />
                <UsageBar used={balancer.queued.background} total={scale} label={`${balancer.balancerId}: background tasks waiting`} tone="background" />
                {/* Both numbers named: "0 / 37" read as "0 of 37". */}
                <span className="queue-figures">
                  <span className="queue-figure-user-present">user-present {formatCount(balancer.queued.userPresent)}</span> ·{' '}
                  <span className="queue-figure-background">background {formatCount(balancer.queued.background)}</span>
                </span>
              </>
            ) : (
              <span className="muted">—</span>
            )}
          </li>
        ))}
      </ul>
    </div>
  );
}
