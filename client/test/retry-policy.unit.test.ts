import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import {
  BalancerLostError,
  BalancerUnreachableError,
  CancelledError,
  DeadlineExceededError,
  IntegrationAtLimitError,
  InvalidTaskError,
  QueueFullError,
  errorFromCode,
  ShedError,
  TaskFailedError,
  WorkerLostError,
  retryDelayMs,
  retryable,
} from '../src/index';

const policy = { maxAttempts: 4, minDelayMs: 100, maxDelayMs: 5000 };

test('only what did not run is retried, and what may have run only when idempotent', () => {
  for (const error of [new QueueFullError('q'), new ShedError('s'), new IntegrationAtLimitError('l'), new BalancerUnreachableError('u')]) {
    assert.equal(retryable(error, false), true, error.name);
  }
  for (const error of [new WorkerLostError('w'), new BalancerLostError('b')]) {
    assert.deepEqual([retryable(error, false), retryable(error, true)], [false, true], error.name);
  }
  for (const error of [
    new InvalidTaskError('i'),
    new DeadlineExceededError('d'),
    new CancelledError('c'),
    new TaskFailedError('HR_ERR_UPSTREAM_UNAVAILABLE', 'down', undefined, { retryAfterMs: 100 }),
  ]) {
    assert.deepEqual([retryable(error, false), retryable(error, true)], [false, false], error.name);
  }
});

test("the wait honours the balancer's hint, backs off without one, is spread by jitter and capped", () => {
  const hinted = new QueueFullError('q', { retryAfterMs: 1000 });
  assert.equal(
    retryDelayMs(policy, 1, hinted, () => 0),
    1000,
    'never below the hint',
  );
  assert.equal(
    retryDelayMs(policy, 1, hinted, () => 0.999),
    1500,
    'at most half again above it',
  );
  const bare = new BalancerLostError('b');
  assert.deepEqual(
    [1, 2, 3].map((attempt) => retryDelayMs(policy, attempt, bare, () => 0)),
    [100, 200, 400],
    'doubling from minDelayMs',
  );
  assert.equal(
    retryDelayMs(policy, 30, bare, () => 0.5),
    5000,
    'capped at maxDelayMs',
  );
  assert.equal(
    retryDelayMs(policy, 1, new QueueFullError('q', { retryAfterMs: 60_000 }), () => 0),
    5000,
    'a hint above maxDelayMs is capped too',
  );
  const spread = new Set(Array.from({ length: 50 }, () => retryDelayMs(policy, 1, hinted)));
  assert.ok(spread.size > 10, `clients turned away together come back apart: ${spread.size} distinct waits of 50`);
});

test('each error class has its code and says whether the task may have run', () => {
  assert.deepEqual(
    [new QueueFullError('q').code, QueueFullError.code, new QueueFullError('q').name, new QueueFullError('q').runState],
    ['HR_ERR_QUEUE_FULL', 'HR_ERR_QUEUE_FULL', 'QueueFullError', 'not-run'],
  );
  assert.deepEqual([new WorkerLostError('w').runState, new TaskFailedError('X', 'x', undefined).runState], ['may-have-run', 'ran']);
  assert.ok(new ShedError('s') instanceof Error);
});

test('HR_ERR_INTEGRATION_AT_LIMIT becomes IntegrationAtLimitError: not run, retryable', () => {
  const error = errorFromCode('HR_ERR_INTEGRATION_AT_LIMIT', 'integration slow has 4 tasks in flight', { retryAfterMs: 1000 });
  assert.ok(error instanceof IntegrationAtLimitError);
  assert.equal(error.runState, 'not-run');
  assert.equal(retryable(error, false), true);
});
