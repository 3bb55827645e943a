import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { limitFigures, type LimitPoint } from '../src/auto-limit-figures';

const startMs = 100_000;
const endMs = startMs + 60_000;
const times = {
  observedFromUnixMs: 0,
  incidentStartUnixMs: startMs,
  incidentEndUnixMs: endMs,
  observedUntilUnixMs: endMs + 120_000,
  normalInFlight: 20,
  settleBand: 0.1,
};

/** One decision every 5 s from 50 s before the start to the observation's end; `limitAt` gives the limit by ms from the incident's start. */
function history(limitAt: (fromStartMs: number) => number): LimitPoint[] {
  const points: LimitPoint[] = [];
  for (let at = startMs - 50_000; at <= times.observedUntilUnixMs; at += 5_000)
    points.push({ atUnixMs: at, limitInFlight: limitAt(at - startMs), inFlight: 5, runTimeP50Ms: 500, baselineMs: 500, reason: 'at its maximum' });
  return points;
}

const during = (fromMs: number, untilMs: number) => (ms: number) => ms >= fromMs && ms < untilMs;

test('one fall and one return: settled at the fall, back at the return, two changes', () => {
  const f = limitFigures(
    history((ms) => (during(15_000, 95_000)(ms) ? 10 : 20)),
    times,
  );
  assert.equal(f.atStartInFlight, 20);
  assert.equal(f.atEndInFlight, 10);
  assert.equal(f.lowestInFlight, 10);
  assert.equal(f.settledAfterMs, 15_000);
  assert.equal(f.backAfterMs, 35_000);
  assert.equal(f.firstBackAfterMs, 35_000);
  assert.equal(f.changes, 2);
  assert.equal(f.leadInChanges, 0);
});

test('a bounce during the incident: settled at the last fall, every change counted', () => {
  const f = limitFigures(
    history((ms) => (during(15_000, 20_000)(ms) || during(25_000, 95_000)(ms) ? 10 : 20)),
    times,
  );
  assert.equal(f.settledAfterMs, 25_000);
  assert.equal(f.changes, 4);
});

test('within ±10% of the value at the end counts as settled; a further step down does not', () => {
  const inBand = limitFigures(
    history((ms) => (during(15_000, 20_000)(ms) ? 11 : during(20_000, 95_000)(ms) ? 10 : 20)),
    times,
  );
  assert.equal(inBand.settledAfterMs, 15_000);
  const halving = limitFigures(
    history((ms) => (during(15_000, 20_000)(ms) ? 16 : during(20_000, 95_000)(ms) ? 10 : 20)),
    times,
  );
  assert.equal(halving.settledAfterMs, 20_000);
});

test('a return followed by another fall counts from the later return; not back by the end is null', () => {
  const f = limitFigures(
    history((ms) => (during(15_000, 70_000)(ms) || during(80_000, 100_000)(ms) ? 10 : 20)),
    times,
  );
  assert.equal(f.firstBackAfterMs, 10_000);
  assert.equal(f.backAfterMs, 40_000);
  const never = limitFigures(
    history((ms) => (ms >= 15_000 ? 10 : 20)),
    times,
  );
  assert.equal(never.backAfterMs, null);
  assert.equal(never.settledAfterMs, 15_000);
});

test('a limit that never left its normal value neither settled nor came back', () => {
  const f = limitFigures(
    history(() => 20),
    times,
  );
  assert.equal(f.settledAfterMs, null);
  assert.equal(f.backAfterMs, null);
  assert.equal(f.changes, 0);
});

test('a fall in the lead-in is a change of the lead-in; decisions outside the observation are left out', () => {
  const f = limitFigures(
    history((ms) => (during(-30_000, -20_000)(ms) ? 10 : 20)),
    { ...times, observedFromUnixMs: startMs - 40_000 },
  );
  assert.equal(f.leadInChanges, 2);
  const later = limitFigures(
    history((ms) => (during(-30_000, -20_000)(ms) ? 10 : 20)),
    { ...times, observedFromUnixMs: startMs - 15_000 },
  );
  assert.equal(later.leadInChanges, 0);
});
