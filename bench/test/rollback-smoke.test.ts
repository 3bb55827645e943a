/**
 * Keeps the rollback benchmark from rotting: runs it in smoke mode (3 rollbacks, tiny load) as
 * its own process, as `npm run bench -- rollback --smoke` would, and checks the JSON it writes.
 * It asserts what a rollback must do (every balancer acknowledges; nothing starts on the candidate
 * afterwards), never how fast.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { RollbackResult } from '../src/rollback';
import { runSmoke } from './smoke-run';

const timeoutMs = 90_000;

test(
  'the rollback benchmark runs end to end in smoke mode: every rollback acknowledged by 3 balancers, no candidate dispatch after it',
  { timeout: timeoutMs + 15_000 },
  async (t) => {
    const result = await runSmoke<RollbackResult>(t, 'rollback', timeoutMs);

    assert.equal(result.benchmark, 'rollback');
    assert.equal(result.mode, 'smoke');
    assert.equal(result.settings.balancerCount, 3);
    assert.equal(result.rollbacks.length, result.settings.rollbacks);
    for (const [index, rollback] of result.rollbacks.entries()) {
      const what = `rollback #${index + 1}`;
      assert.equal(rollback.acknowledgedBy.length, 3, `${what}: acknowledged by ${rollback.acknowledgedBy.join(', ')}`);
      assert.deepEqual(rollback.missing, [], what);
      assert.equal(rollback.durable, 'done', what);
      assert.ok(rollback.durableMs >= rollback.roundTripMs, `${what}: durable after ${rollback.durableMs} ms, answered after ${rollback.roundTripMs} ms`);
      assert.ok(Number.isFinite(rollback.resumeRoundTripMs), what);
      assert.ok(Number.isFinite(rollback.toLastAckMs) && rollback.toLastAckMs >= 0, `${what}: to the last acknowledgement ${rollback.toLastAckMs}`);
      assert.ok(rollback.candidateStartsInLeadIn > 0, `${what}: no candidate traffic before it`);
      assert.ok(rollback.baselineStartsAfterAck > 0, `${what}: no traffic on the baseline after it`);
      // A balancer acknowledges only once the covered tasks it had already sent to candidate workers have started
      // there, so by the workers' own records nothing starts on the candidate after the last acknowledgement.
      assert.equal(
        rollback.candidateStartsAfterAck,
        0,
        `${what}: tasks started on the candidate after the acknowledgement: ${JSON.stringify(rollback.lateCandidateStarts)}`,
      );
      assert.equal(rollback.candidateStartsSentAfterAck, 0, what);
    }
    assert.equal(result.candidateStartsSentAfterAck, 0);
    assert.equal(result.acknowledgedByAllEveryTime, true);
    assert.equal(result.toLastAck.count, result.settings.rollbacks);
    assert.equal(result.polling.samples.length, result.settings.pollingRepetitions);
    for (const sample of result.polling.samples) assert.equal(sample.perBalancerMs.length, 3);
    assert.ok(Number.isFinite(result.pollingToRollbackRatio), `ratio ${result.pollingToRollbackRatio}`);
    assert.ok(result.load.succeeded > 0, 'no load');
    assert.deepEqual(
      result.goals.map((goal) => typeof goal.met),
      result.goals.map(() => 'boolean'),
    );
  },
);
