import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { judgeIntegration, pickShown, troubleRuleDefaults, type TroubleVerdict, type WindowFigures } from '../src/integration-trouble';

const figures = (tasks: number, errors: number, p99Ms: number | null, p50Ms: number | null = p99Ms === null ? null : p99Ms / 2): WindowFigures => ({
  tasks,
  errors,
  p50Ms,
  p99Ms,
});

test('the trouble rule, case by case', () => {
  const cases: { name: string; recent: WindowFigures; previous: WindowFigures; state: TroubleVerdict['state']; reasons: string[] }[] = [
    {
      name: 'p99 ten times its own baseline: trouble, named with its figure',
      recent: figures(100, 0, 4100),
      previous: figures(1000, 0, 418),
      state: 'trouble',
      reasons: ['bank-c p99 4.1 s, 9.8x its previous 10 min (418 ms)'],
    },
    { name: 'p99 2.9 times: below the line', recent: figures(100, 0, 1218), previous: figures(1000, 0, 420), state: 'ok', reasons: [] },
    { name: 'three times, but only 40 ms more: noise for a bank call', recent: figures(100, 0, 60), previous: figures(1000, 0, 20), state: 'ok', reasons: [] },
    {
      name: 'errors above the line whatever the baseline',
      recent: figures(80, 20, 400),
      previous: figures(1000, 10, 400),
      state: 'trouble',
      reasons: ['bank-c errors 20.0% of 100 tasks (its previous 10 min: 1.0%)'],
    },
    {
      name: 'every task failing: trouble with no latency at all',
      recent: figures(0, 50, null),
      previous: figures(0, 5, null),
      state: 'trouble',
      reasons: ['bank-c errors 100.0% of 50 tasks (its previous 10 min: too few tasks)'],
    },
    { name: 'errors just under the line', recent: figures(91, 9, 400), previous: figures(1000, 0, 400), state: 'ok', reasons: [] },
    { name: 'too few recent tasks: no verdict', recent: figures(10, 9, 9000), previous: figures(1000, 0, 400), state: 'not-enough-data', reasons: [] },
    { name: 'no baseline yet: latency not judged', recent: figures(100, 0, 9000), previous: figures(5, 0, 100), state: 'ok', reasons: [] },
    {
      name: 'slow and failing: both reasons',
      recent: figures(50, 50, 3000),
      previous: figures(1000, 0, 500),
      state: 'trouble',
      reasons: ['bank-c errors 50.0% of 100 tasks (its previous 10 min: 0.0%)', 'bank-c p99 3.0 s, 6.0x its previous 10 min (500 ms)'],
    },
  ];
  for (const { name, recent, previous, state, reasons } of cases) {
    const verdict = judgeIntegration('bank-c', recent, previous);
    assert.equal(verdict.state, state, name);
    assert.deepEqual(verdict.reasons, reasons, name);
  }
});

test('the ratio and share come with the verdict, for the table and the metrics', () => {
  const verdict = judgeIntegration('bank-c', figures(90, 10, 2000), figures(600, 0, 500));
  assert.equal(verdict.p99Ratio, 4);
  assert.equal(verdict.errorShare, 0.1);
});

test('a capped list keeps the worst in trouble and says how many it hides', () => {
  const item = (integration: string, recent: WindowFigures, previous: WindowFigures) => ({
    integration,
    recent,
    verdict: judgeIntegration(integration, recent, previous),
  });
  const all = [
    item('bank-busy', figures(5000, 0, 400), figures(50_000, 0, 400)),
    item('bank-quiet', figures(30, 0, 400), figures(300, 0, 400)),
    item('bank-slow', figures(40, 0, 4000), figures(400, 0, 400)),
    item('bank-slower', figures(40, 0, 8000), figures(400, 0, 400)),
    item('bank-failing', figures(30, 30, 400), figures(400, 0, 400)),
  ];
  const { shown, hidden, hiddenInTrouble } = pickShown(all, 3);
  assert.deepEqual(
    shown.map((entry) => entry.integration),
    ['bank-slower', 'bank-failing', 'bank-slow'],
  );
  assert.equal(hidden, 2);
  assert.equal(hiddenInTrouble, 0);
  const two = pickShown(all, 2);
  assert.equal(two.hiddenInTrouble, 1);
  assert.equal(pickShown(all, 10).shown.at(-1)!.integration, 'bank-quiet', 'past the troubled ones, the busiest first');
  assert.equal(troubleRuleDefaults.p99RatioAtLeast, 3);
});
