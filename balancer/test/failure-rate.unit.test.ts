/** FailureRate without a network: the clock is passed in, so the window is driven by hand. */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { FailureRate, judgeOutcome, maxFailureSeries, type FailureVerdict, type TaskJudgement } from '../src/failure-rate';
import type { DispatchOutcome } from '../src/worker-channels';

const options = { windowMs: 10_000, minTasks: 10, shareAbovePeers: 0.5 };

/** Records `tasks` answered tasks, the first `failures` of them failed, then `timeouts` that ran out of time. */
function record(rate: FailureRate, workerId: string, integration: string, tasks: number, failures: number, atMs: number, timeouts = 0) {
  let verdict: FailureVerdict = { kind: 'unknown' };
  for (let i = 0; i < tasks; i++) verdict = rate.record('c', workerId, integration, i < failures ? 'failure' : 'success', atMs);
  for (let i = 0; i < timeouts; i++) verdict = rate.record('c', workerId, integration, 'timeout', atMs);
  return verdict;
}

test('which outcomes count: handler errors (upstream ones too), lost tasks and NO_HANDLER refusals fail; started tasks past their deadline timed out; cancels, full and unreachable do not count', () => {
  const done = (code?: string): DispatchOutcome => ({
    kind: 'done',
    response: { workerId: 'w', runMs: 1, queueWaitMs: 0, ...(code ? { error: { code, message: '', retryAfterMs: 0 } } : {}) },
  });
  const refused = (code: string, unreachable = false): DispatchOutcome => ({ kind: 'not-started', unreachable, code, message: '' });
  const table: [DispatchOutcome, TaskJudgement | undefined][] = [
    [done(), 'success'],
    [done('HR_ERR_HANDLER_FAILED'), 'failure'],
    [done('HR_ERR_UPSTREAM_UNAVAILABLE'), 'failure'],
    [done('HR_ERR_DEADLINE_EXCEEDED'), 'timeout'],
    [done('HR_ERR_CANCELLED'), undefined],
    [done('HR_ERR_WORKER_STOPPED'), undefined],
    [refused('HR_ERR_NO_HANDLER'), 'failure'],
    [refused('HR_ERR_WORKER_FULL'), undefined],
    [refused('HR_ERR_WORKER_DRAINING'), undefined],
    [refused('', true), undefined],
    [{ kind: 'lost', message: 'reset' }, 'failure'],
    [{ kind: 'deadline', started: true }, 'timeout'],
    [{ kind: 'deadline', started: false }, undefined],
    [{ kind: 'cancelled', started: false }, undefined],
  ];
  for (const [outcome, expected] of table) assert.equal(judgeOutcome(outcome), expected, JSON.stringify(outcome));
});

test('an outlier needs the minimum volume on both sides and a failure share far above its peers', () => {
  const rate = new FailureRate(options);
  assert.equal(record(rate, 'w1', 'a', 20, 20, 0).kind, 'unknown', 'no peers yet');
  assert.equal(record(rate, 'w2', 'a', 9, 0, 0).kind, 'unknown', 'below the minimum');
  assert.equal(record(rate, 'w2', 'a', 1, 0, 0).kind, 'in-line');
  assert.deepEqual(record(rate, 'w1', 'a', 1, 1, 0), { kind: 'outlier', integration: 'a', tasks: 21, failures: 21, peerTasks: 10, peerFailures: 0 });
  // On probation (back from an ejection for failing), half the minimum of its own tasks will do.
  const probation = new FailureRate(options);
  record(probation, 'w2', 'a', 10, 0, 0);
  assert.equal(record(probation, 'w1', 'a', 4, 4, 0).kind, 'unknown');
  assert.equal(probation.record('c', 'w1', 'a', 'failure', 0, true).kind, 'outlier');
  // 40% above its peers is not enough at 0.5.
  const mild = new FailureRate(options);
  record(mild, 'w2', 'a', 20, 2, 0);
  assert.equal(record(mild, 'w1', 'a', 10, 5, 0).kind, 'in-line');
});

test('a difference that chance explains at the minimum volume is no outlier: the first tasks of an outage on one worker, against peers still counting successes from before it', () => {
  // Seen in CI: "10 of 10 bank-a tasks failed, 6 of 12 on the other workers", 0.5 apart at the point values.
  const early = new FailureRate(options);
  record(early, 'w2', 'bank-a', 12, 6, 0);
  assert.equal(record(early, 'w1', 'bank-a', 10, 10, 0).kind, 'in-line');
  // The same worker against peers that fail none of 12 is an outlier at the same volume.
  const badDeploy = new FailureRate(options);
  record(badDeploy, 'w2', 'bank-a', 12, 0, 0);
  assert.equal(record(badDeploy, 'w1', 'bank-a', 10, 10, 0).kind, 'outlier');
  // With more tasks on both sides, the same point values are far enough apart to be sure of.
  const sure = new FailureRate(options);
  record(sure, 'w2', 'bank-a', 120, 40, 0);
  assert.equal(record(sure, 'w1', 'bank-a', 100, 100, 0).kind, 'outlier', '100 of 100 against 40 of 120');
});

test('an outage fails everyone alike: no outlier, whatever the volume; other integrations are judged apart', () => {
  const rate = new FailureRate(options);
  const kinds = new Set<string>();
  for (let round = 0; round < 10; round++) {
    for (const workerId of ['w1', 'w2', 'w3', 'w4']) kinds.add(record(rate, workerId, 'bank-a', 10, 10, round * 100).kind);
  }
  assert.deepEqual([...kinds].sort(), ['in-line', 'unknown']);
  record(rate, 'w2', 'bank-b', 20, 0, 1000);
  assert.equal(record(rate, 'w1', 'bank-b', 10, 10, 1000).kind, 'outlier');
});

test('an outage whose tasks fail at once on one worker and run out of time on its peers ejects none: the peers get no more done', () => {
  const rate = new FailureRate(options);
  // Before the outage every worker ran its tasks; then the upstream failed them at once on w1
  // while the peers' calls hung until their deadlines (a starved machine, a connection pool full).
  record(rate, 'w2', 'bank-a', 12, 0, 0, 30);
  assert.equal(record(rate, 'w1', 'bank-a', 12, 10, 0).kind, 'in-line', 'w1 fails more of what it answers, but its peers finish less');
  // A bad deploy beside peers that time out some tasks is still an outlier: they get most done.
  const badDeploy = new FailureRate(options);
  record(badDeploy, 'w2', 'bank-a', 30, 0, 0, 5);
  assert.deepEqual(record(badDeploy, 'w1', 'bank-a', 12, 12, 0), {
    kind: 'outlier',
    integration: 'bank-a',
    tasks: 12,
    failures: 12,
    peerTasks: 30,
    peerFailures: 0,
  });
  // Timeouts alone on one worker (a slow upstream there) make it no failing outlier.
  const slow = new FailureRate(options);
  record(slow, 'w2', 'bank-a', 30, 0, 0);
  assert.equal(record(slow, 'w1', 'bank-a', 10, 0, 0, 30).kind, 'in-line');
});

test('the window slides: failures older than windowMs no longer count; forgetWorker drops a worker from its peers too', () => {
  const rate = new FailureRate(options);
  record(rate, 'w2', 'a', 20, 0, 0);
  record(rate, 'w1', 'a', 9, 9, 0);
  // 10 s on: the old failures are out of the window, so one more is far from the minimum.
  record(rate, 'w2', 'a', 20, 0, 10_000);
  assert.equal(record(rate, 'w1', 'a', 1, 1, 10_000).kind, 'unknown');
  assert.equal(record(rate, 'w1', 'a', 9, 9, 10_500).kind, 'outlier');
  rate.forgetWorker('c', 'w2');
  assert.equal(record(rate, 'w1', 'a', 1, 1, 10_500).kind, 'unknown', 'no peers left to compare with');
});

test('bounded: at most maxFailureSeries series; outcomes beyond are counted as untracked; series with nothing in the window are swept', () => {
  const rate = new FailureRate(options);
  for (let i = 0; i < maxFailureSeries + 10; i++) rate.record('c', `w${i}`, 'a', 'success', 0);
  assert.equal(rate.series, maxFailureSeries);
  assert.equal(rate.untracked, 11);
  rate.record('c', 'w0', 'b', 'success', 20_000);
  assert.equal(rate.series, 2, 'the stale ones were swept when the window moved on');
  const off = new FailureRate({ ...options, minTasks: 0 });
  assert.equal(record(off, 'w1', 'a', 50, 50, 0).kind, 'unknown');
  assert.equal(off.series, 0, 'off: nothing is followed');
});
