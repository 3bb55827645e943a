import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { IntegrationShares, maxMarksPerCluster } from '../src/integration-shares';

test('a rate mark holds until its time, whatever wakes the queue; an in-flight mark until the next wake-up', () => {
  let nowMs = 1_000;
  const shares = new IntegrationShares(4, () => nowMs);
  shares.markAtRate('c', 'slow', 2, 500, 'user');
  shares.markAtLimit('c', 'busy', 3, 'user');
  assert.equal(shares.msUntilRateDue('c'), 500);
  shares.clear('c');
  assert.deepEqual([shares.isAtLimit('c', 'slow', 'user'), shares.isAtLimit('c', 'busy', 'user')], [true, false]);
  assert.deepEqual(shares.holdOf('c', 'slow'), { kind: 'rate', maxStartsPerSecond: 2, untilMs: 1_500, holds: 'all' });
  nowMs = 1_500;
  assert.equal(shares.msUntilRateDue('c'), undefined);
  assert.equal(shares.isAtLimit('c', 'slow', 'background'), false);
  assert.equal(shares.markedCount('c'), 0, 'the mark past its time is gone');
});

test('at most maxMarksPerCluster integrations are marked per cluster; rate marks past their time make room', () => {
  let nowMs = 0;
  const shares = new IntegrationShares(4, () => nowMs);
  for (let i = 0; i < maxMarksPerCluster; i++) shares.markAtRate('c', `i${i}`, 1, i < 10 ? 100 : 60_000, 'background');
  shares.markAtLimit('c', 'one-more', 1, 'background');
  assert.deepEqual([shares.markedCount('c'), shares.marksDropped, shares.isAtLimit('c', 'one-more', 'background')], [maxMarksPerCluster, 1, false]);
  shares.markAtLimit('other-cluster', 'one-more', 1, 'background');
  assert.equal(shares.isAtLimit('other-cluster', 'one-more', 'background'), true, 'per cluster');
  nowMs = 100;
  shares.markAtLimit('c', 'one-more', 1, 'background');
  assert.deepEqual([shares.markedCount('c'), shares.marksDropped, shares.isAtLimit('c', 'one-more', 'background')], [maxMarksPerCluster - 9, 1, true]);
});

test("a background task's refusal holds that integration's background tasks only; a user-present one's holds both, until the next wake-up", () => {
  const shares = new IntegrationShares(4);
  for (const priority of ['user', 'user', 'background', 'background', 'background'] as const) shares.added('bank', priority);
  shares.markAtLimit('c', 'bank', 10, 'background');
  assert.deepEqual(
    [shares.isAtLimit('c', 'bank', 'background'), shares.isAtLimit('c', 'bank', 'user')],
    [true, false],
    'the kept share is left for user-present tasks',
  );
  assert.deepEqual([shares.queuedAtLimit('c', 'user'), shares.queuedAtLimit('c', 'background'), shares.queuedAtLimit('c', 'all')], [0, 3, 3]);
  assert.deepEqual([shares.shareFull('c', 'bank', 'background'), shares.shareFull('c', 'bank', 'user')], [true, false]);
  const changes = shares.markChangesIn('c');
  shares.markAtLimit('c', 'bank', 10, 'user');
  assert.equal(shares.markChangesIn('c'), changes + 1, 'widening a mark is a change');
  shares.markAtLimit('c', 'bank', 10, 'background');
  assert.equal(shares.isAtLimit('c', 'bank', 'user'), true, "a background task's refusal does not free the user-present ones");
  assert.equal(shares.markChangesIn('c'), changes + 1);
  assert.deepEqual(shares.waitingAtLimit(10), [{ cluster: 'c', integration: 'bank', waiting: 5 }]);
  shares.clear('c');
  assert.deepEqual([shares.isAtLimit('c', 'bank', 'background'), shares.queuedAtLimit('c', 'all')], [false, 0]);
});
