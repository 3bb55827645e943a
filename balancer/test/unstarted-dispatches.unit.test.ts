import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { UnstartedDispatches } from '../src/routing/unstarted-dispatches';

test('a rollback waits only for the dispatches it covers, and not past its timeout', async () => {
  const dispatches = new UnstartedDispatches();
  const a1 = dispatches.begin('bank-a');
  const b1 = dispatches.begin('bank-b');
  assert.equal(await dispatches.settled((i) => i === 'bank-c', 1000), true, 'nothing of bank-c in flight');

  let settled: boolean | undefined;
  const waiting = dispatches.settled((i) => i === 'bank-a', 5000).then((value) => (settled = value));
  b1();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(settled, undefined, 'bank-b starting does not release a bank-a rollback');
  a1();
  a1();
  assert.equal(await waiting, true);

  const stuck = dispatches.begin('bank-a');
  const startedAt = Date.now();
  // (Its timer does not hold the process open; this sleep does.)
  const [result] = await Promise.all([dispatches.settled(() => true, 50), new Promise((resolve) => setTimeout(resolve, 80))]);
  assert.equal(result, false);
  assert.ok(Date.now() - startedAt >= 45);
  stuck();
});
