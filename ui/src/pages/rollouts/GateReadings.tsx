import type { GateReading, GatesReading, Rollout } from '../../api/types';
import { formatCount, formatTime } from '../../format';
import { GateStatusTag, gateDisplay } from './gate-display';

/** Each gate's value against its line, per integration and for the candidate's workers, as the autopilot last read them. */
export function GateReadings({ rollout }: { rollout: Rollout }) {
  const reading = rollout.lastReading;
  if (!reading) return <p className="muted">Not read yet: the autopilot reads the gates at its next tick.</p>;
  return (
    <>
      <p className="hint">
        Read at {formatTime(reading.atUnixMs)} over a {reading.windowSeconds} s window; an integration is judged once each cluster ran{' '}
        {formatCount(rollout.plan.minSamples)} of its tasks in the window.
      </p>
      <div className="gate-tables">
        {reading.integrations.map((integration) => (
          <GateTable
            key={integration.integration}
            caption={integration.integration}
            detail={`${formatCount(integration.samples.baseline)} tasks on the baseline, ${formatCount(integration.samples.candidate)} on the candidate`}
            readings={integration.gates}
            status={integration.status}
          />
        ))}
        <GateTable
          caption="Candidate workers"
          detail={`${reading.workers.reporting} reporting; the worst one counts`}
          readings={reading.workers.gates}
          status={reading.workers.status}
        />
      </div>
      {rollout.rolledBack.length > 0 && <p className="muted">No longer judged (rolled back to the baseline): {rollout.rolledBack.join(', ')}.</p>}
    </>
  );
}

function GateTable(props: { caption: string; detail: string; readings: GateReading[]; status: GatesReading['workers']['status'] }) {
  return (
    <div className="table-scroll gate-table-box">
      <table className="table gate-table">
        <caption>
          <span className="gate-caption">
            <span className="truncated gate-subject" title={props.caption}>
              {props.caption}
            </span>
            <GateStatusTag status={props.status} />
            <span className="hint gate-detail">{props.detail}</span>
          </span>
        </caption>
        <thead>
          <tr>
            <th scope="col">Gate</th>
            <th scope="col" className="numeric">
              Value
            </th>
            <th scope="col" className="numeric">
              Line
            </th>
            <th scope="col">Status</th>
          </tr>
        </thead>
        <tbody>
          {props.readings.map((reading) => {
            const display = gateDisplay[reading.gate];
            return (
              <tr key={reading.gate} className={`gate-row gate-row-${reading.status}`}>
                <th scope="row" title={display.explains}>
                  {display.label}
                </th>
                <td className="numeric">
                  {display.format(reading.value)}
                  <LineBar value={reading.value} line={reading.line} />
                </td>
                <td className="numeric">≤ {display.format(reading.line)}</td>
                <td>
                  <GateStatusTag status={reading.status} />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/** The value as a share of its line, the line at 80% of the bar's width (the figures are in the cells). */
function LineBar({ value, line }: { value: number | null; line: number }) {
  if (value === null || line <= 0) return null;
  const share = Math.max(0, Math.min(1.25, value / line));
  return (
    <span className="line-bar" aria-hidden="true">
      <span className="line-bar-fill" style={{ width: `${share * 80}%` }} />
      <span className="line-bar-line" />
    </span>
  );
}
