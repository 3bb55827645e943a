import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { IntegrationShares, maxMarksPerCluster } from '../src/integration-shares';

test('a rate mark holds until its time, whatever wakes the queue; an in-flight mark until the next wake-up', () => {
  let nowMs = 1_000;
  const shares = new IntegrationShares(4, () => nowMs);
  shares.markAtRate('c', 'slow', 2, 500);
  shares.markAtLimit('c', 'busy', 3);
  assert.equal(shares.msUntilRateDue('c'), 500);
  shares.clear('c');
  assert.deepEqual([shares.isAtLimit('c', 'slow'), shares.isAtLimit('c', 'busy')], [true, false]);
  assert.deepEqual(shares.holdOf('c', 'slow'), { kind: 'rate', maxStartsPerSecond: 2, untilMs: 1_500 });
  nowMs = 1_500;
  assert.equal(shares.msUntilRateDue('c'), undefined);
  assert.equal(shares.isAtLimit('c', 'slow'), false);
  assert.equal(shares.markedCount('c'), 0, 'the mark past its time is gone');
});

test('at most maxMarksPerCluster integrations are marked per cluster; rate marks past their time make room', () => {
  let nowMs = 0;
  const shares = new IntegrationShares(4, () => nowMs);
  for (let i = 0; i < maxMarksPerCluster; i++) shares.markAtRate('c', `i${i}`, 1, i < 10 ? 100 : 60_000);
  shares.markAtLimit('c', 'one-more', 1);
  assert.deepEqual([shares.markedCount('c'), shares.marksDropped, shares.isAtLimit('c', 'one-more')], [maxMarksPerCluster, 1, false]);
  shares.markAtLimit('other-cluster', 'one-more', 1);
  assert.equal(shares.isAtLimit('other-cluster', 'one-more'), true, 'per cluster');
  nowMs = 100;
  shares.markAtLimit('c', 'one-more', 1);
  assert.deepEqual([shares.markedCount('c'), shares.marksDropped, shares.isAtLimit('c', 'one-more')], [maxMarksPerCluster - 9, 1, true]);
});
