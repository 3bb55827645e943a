import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { UnleashFailedError } from '../src/errors';
import { applySteps, type ChangeStep } from '../src/unleash/change-steps';

/** Steps over an in-memory value: applySteps is our logic, Unleash is not involved here. */
function steps(state: Record<string, number>, plan: [string, number][], failAt: number, undoFailsFor: string[] = []): ChangeStep[] {
  return plan.map(([key, to], i) => {
    const from = state[key]!;
    return {
      describe: `${key}: ${from} -> ${to}`,
      apply: async () => {
        if (i === failAt) throw new UnleashFailedError(`Unleash answered 500 to PUT ${key}`, { status: 500 });
        state[key] = to;
      },
      undo: async () => {
        if (undoFailsFor.includes(key)) throw new Error('still down');
        state[key] = from;
      },
    };
  });
}

test('a change of several strategies is all or nothing: applied steps are taken back when one fails', async () => {
  const state = { a: 10, b: 20, c: 30 };
  await assert.rejects(
    applySteps(
      steps(
        state,
        [
          ['a', 11],
          ['b', 21],
          ['c', 31],
        ],
        2,
      ),
    ),
    (error: UnleashFailedError) => {
      assert.match(error.message, /Unleash answered 500 to PUT c\. Nothing was changed \(2 earlier step\(s\) were taken back\)/);
      assert.deepEqual(error.details.undone, ['b: 20 -> 21', 'a: 10 -> 11']);
      assert.equal(error.details.status, 500);
      return true;
    },
  );
  assert.deepEqual(state, { a: 10, b: 20, c: 30 });
});

test('when a step cannot be taken back, the error says exactly which', async () => {
  const state = { a: 10, b: 20 };
  await assert.rejects(
    applySteps(
      steps(
        state,
        [
          ['a', 11],
          ['b', 21],
        ],
        1,
        ['a'],
      ),
    ),
    (error: UnleashFailedError) => {
      assert.match(error.message, /could NOT be taken back: a: 10 -> 11/);
      assert.deepEqual(error.details.applied, ['a: 10 -> 11']);
      return true;
    },
  );
  await applySteps(steps(state, [['b', 22]], -1));
  assert.deepEqual(state, { a: 11, b: 22 });
});
