import { useCallback, useEffect, useState } from 'react';
import { isApiError } from '../../api/client';
import type { Rollout, TrafficView } from '../../api/types';
import { ConfirmDialog } from '../../components/ConfirmDialog';
import { ErrorNotice } from '../../components/ErrorNotice';
import { useAction } from '../../hooks/useAction';
import { useSession, useWhyReadOnly } from '../../session';

/** An example for the configured integrations: small first, a parallelism search, then all of it. */
export function examplePlan(integrations: string[]): string {
  const plan = {
    name: 'candidate rollout',
    integrations: integrations.length > 0 ? integrations : ['bank-a'],
    windowSeconds: 30,
    holdSeconds: 60,
    minSamples: 50,
    gates: { p50Ratio: 1.1, p95Ratio: 1.25, errorRateIncrease: 0.01 },
    steps: [
      { candidatePercent: 5, maxParallelism: 4 },
      { candidatePercent: 25, search: { from: 4, factor: 1.5, max: 16 } },
      { candidatePercent: 50, maxParallelism: 8 },
      { candidatePercent: 100, maxParallelism: 8, holdSeconds: 300 },
    ],
  };
  return JSON.stringify(plan, null, 2);
}

/** "body.steps.0.holdSeconds" as the plan's reader knows it: "steps[0].holdSeconds". */
function planPath(field: string): string {
  return field.replace(/^body\.?/, '').replace(/\.(\d+)(?=\.|$)/g, '[$1]') || '(the whole plan)';
}

type Problems = { title: string; fields: { field: string; message: string }[] };

/** A plan as JSON, checked by the control plane: each problem it finds is listed under the editor by field. */
export function StartRolloutForm({ onStarted }: { onStarted(rollout: Rollout): void }) {
  const { client } = useSession();
  const whyReadOnly = useWhyReadOnly();
  const [text, setText] = useState<string | undefined>();
  const [parsed, setParsed] = useState<unknown>();
  const [confirming, setConfirming] = useState(false);
  const [problems, setProblems] = useState<Problems>();
  const [outcome, run] = useAction<Rollout>();

  // The example names the integrations the control plane knows (GET /traffic lists them).
  const loadExample = useCallback(
    async (signal?: AbortSignal) =>
      examplePlan(
        await client.get<TrafficView>('/traffic', signal).then(
          (traffic) => Object.keys(traffic.flag.integrations),
          () => [],
        ),
      ),
    [client],
  );
  useEffect(() => {
    const abort = new AbortController();
    void loadExample(abort.signal).then((example) => {
      if (!abort.signal.aborted) setText((current) => current ?? example);
    });
    return () => abort.abort();
  }, [loadExample]);
  const reset = () => {
    setProblems(undefined);
    void loadExample().then(setText);
  };

  const review = () => {
    try {
      setParsed(JSON.parse(text ?? ''));
    } catch (error) {
      setProblems({
        title: 'The plan is not valid JSON; nothing was sent.',
        fields: [{ field: 'JSON', message: error instanceof Error ? error.message : String(error) }],
      });
      return;
    }
    setProblems(undefined);
    setConfirming(true);
  };

  const start = () =>
    run(async () => {
      try {
        const rollout = await client.send<Rollout>('POST', '/rollouts', parsed);
        onStarted(rollout);
        return rollout;
      } catch (error) {
        if (isApiError(error) && error.fields.length > 0) {
          setProblems({
            title: `The control plane refused the plan (HTTP ${error.status}, ${error.code}); nothing was started.`,
            fields: error.fields.map((f) => ({ field: planPath(f.field), message: f.message })),
          });
        }
        throw error;
      }
    });

  const summary = parsed as { name?: unknown; integrations?: unknown; steps?: unknown } | undefined;
  const problemsId = 'plan-problems';
  return (
    <section className="card" aria-labelledby="start-rollout-title">
      <h2 id="start-rollout-title">Start a rollout</h2>
      <p className="hint">
        A plan as JSON: the integrations it moves, the gates (a gate left out keeps its default), and the steps, each with a share on the candidate and either a
        max parallelism or a search range. Its first step takes effect at once; the autopilot takes the next ones as the gates hold.
      </p>
      <label htmlFor="rollout-plan">Plan (JSON)</label>
      <textarea
        id="rollout-plan"
        className="plan-editor"
        rows={18}
        spellCheck={false}
        value={text ?? ''}
        onChange={(event) => {
          setText(event.target.value);
          setProblems(undefined);
        }}
        disabled={whyReadOnly !== undefined || text === undefined}
        title={whyReadOnly}
        aria-invalid={problems !== undefined}
        aria-describedby={problems ? problemsId : undefined}
      />
      {problems && (
        <div id={problemsId} className="notice notice-error plan-problems" role="alert">
          <p className="notice-title">{problems.title}</p>
          <ul className="notice-fields" aria-label="Problems in the plan">
            {problems.fields.map((problem, index) => (
              <li key={index}>
                <code>{problem.field}</code>: {problem.message}
              </li>
            ))}
          </ul>
        </div>
      )}
      {outcome.status === 'failed' && !(isApiError(outcome.error) && outcome.error.fields.length > 0) && (
        <ErrorNotice error={outcome.error} action="Starting the rollout" change />
      )}
      <div className="form-actions">
        <button
          type="button"
          className="button-primary"
          disabled={whyReadOnly !== undefined || text === undefined || outcome.status === 'running'}
          title={whyReadOnly}
          onClick={review}
        >
          Review and start…
        </button>
        <button type="button" disabled={whyReadOnly !== undefined} title={whyReadOnly} onClick={reset}>
          Reset to the example
        </button>
      </div>
      <ConfirmDialog open={confirming} title="Start this rollout?" confirmLabel="Start rollout" onConfirm={start} onClose={() => setConfirming(false)}>
        <p>
          <strong>{typeof summary?.name === 'string' ? summary.name : '(no name)'}</strong>
          {Array.isArray(summary?.integrations) && ` on ${summary.integrations.map(String).join(', ')}`}
          {Array.isArray(summary?.steps) && `, ${summary.steps.length} step${summary.steps.length === 1 ? '' : 's'}`}. Its first step moves traffic to the
          candidate now.
        </p>
      </ConfirmDialog>
    </section>
  );
}
