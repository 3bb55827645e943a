import type { TrafficView } from '../../api/types';
import { Truncated } from '../../components/Truncated';

/** The share of each integration's task keys on the candidate cluster now, rollbacks included. */
export function TrafficSplit({ traffic }: { traffic: TrafficView | undefined }) {
  if (!traffic) return <p className="muted">Loading the split…</p>;
  const rows = [
    ...Object.entries(traffic.flag.integrations).map(([name, setting]) => ({
      name,
      effective: traffic.effectivePercent.integrations[name] ?? 0,
      configured: setting.percent,
      rolledBack: setting.rolledBack || traffic.override?.integrations.includes(name) === true,
    })),
    { name: 'others (default)', effective: traffic.effectivePercent.default, configured: traffic.flag.defaultPercent, rolledBack: false },
  ];
  const allBack = !traffic.flag.enabled || traffic.override?.all === true;
  return (
    <div>
      {allBack && <p className="notice notice-warning">Everything is rolled back to the baseline cluster.</p>}
      <ul className="split-list" aria-label="Share of tasks on the candidate cluster">
        {rows.map((row) => (
          <li key={row.name} className="split-row">
            <Truncated text={row.name} className="split-name" />
            <div
              className="split-bar"
              role="meter"
              aria-label={`${row.name}: share on the candidate`}
              aria-valuemin={0}
              aria-valuemax={100}
              aria-valuenow={row.effective}
            >
              <div className="split-candidate" style={{ width: `${row.effective}%` }} />
            </div>
            <span className="split-figure" title={row.effective !== row.configured ? `set to ${row.configured}%` : undefined}>
              {row.effective}%
              {row.effective !== row.configured && <span className="split-note">{row.rolledBack || allBack ? 'rolled back' : `set ${row.configured}%`}</span>}
            </span>
          </li>
        ))}
      </ul>
      <p className="legend">
        <span className="swatch swatch-candidate" aria-hidden="true" /> candidate <span className="swatch swatch-baseline" aria-hidden="true" /> baseline
      </p>
    </div>
  );
}
