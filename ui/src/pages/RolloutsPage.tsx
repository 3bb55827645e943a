import type { Rollout } from '../api/types';
import { ErrorNotice } from '../components/ErrorNotice';
import { ReadOnlyNote } from '../components/ReadOnlyNote';
import { isActive, useRollouts } from '../hooks/useRollouts';
import { DecisionLog } from './rollouts/DecisionLog';
import { GateReadings } from './rollouts/GateReadings';
import { RolloutControls } from './rollouts/RolloutControls';
import { RolloutHistory } from './rollouts/RolloutHistory';
import { RolloutState } from './rollouts/RolloutState';
import { StartRolloutForm } from './rollouts/StartRolloutForm';
import { StepTimeline } from './rollouts/StepTimeline';
import './rollouts/rollouts.css';

/** The gates are read at every autopilot tick (2 s by default). */
const refreshIntervalMs = 2000;

/** The rollout autopilot at work: its plan, its step, the gates it judges by, its decisions; pause, resume, abort, start. */
export function RolloutsPage() {
  const rollouts = useRollouts(refreshIntervalMs);
  const view = rollouts.data;
  const current = view?.current ?? null;
  // A change's answer is the rollout as it is now: shown at once, the next poll brings the rest.
  const show = (rollout: Rollout) => {
    if (view) rollouts.set({ ...view, current: rollout });
    rollouts.refresh();
  };

  return (
    <>
      <h1>Rollouts</h1>
      <p className="lead">
        The autopilot moves integrations to the candidate cluster step by step, and takes the next step only once every gate has held for the step&apos;s hold;
        an integration whose gate breaks is rolled back on its own.
      </p>
      <ReadOnlyNote />
      <ErrorNotice error={rollouts.error} action="Loading the rollouts" />
      {!view ? (
        rollouts.error === undefined && <p className="muted">Loading…</p>
      ) : current === null ? (
        <p className="muted">No rollout yet.</p>
      ) : (
        <>
          <h2>{isActive(current) ? 'Current rollout' : 'Latest rollout'}</h2>
          <RolloutState rollout={current} actingHere={view.actingHere} />
          <section className="section" aria-labelledby="steps-title">
            <h2 id="steps-title">Steps</h2>
            <StepTimeline rollout={current} />
          </section>
          {isActive(current) && <RolloutControls rollout={current} onChanged={show} />}
          <section className="section" aria-labelledby="gates-title">
            <h2 id="gates-title">Gates</h2>
            <GateReadings rollout={current} />
          </section>
          <section className="section" aria-labelledby="decisions-title">
            <h2 id="decisions-title">Decision log</h2>
            <DecisionLog decisions={current.decisions} />
          </section>
        </>
      )}
      {view && !isActive(current) && <StartRolloutForm onStarted={show} />}
      <section className="section" aria-labelledby="history-title">
        <h2 id="history-title">Finished rollouts</h2>
        <RolloutHistory history={view?.history} />
      </section>
    </>
  );
}
