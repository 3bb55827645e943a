/**
 * Keeps the priority benchmark from rotting: runs it in smoke mode (a tiny fleet, a short steady
 * phase and spike) as its own process, as `npm run bench -- priority --smoke` would, and checks the
 * JSON it writes. It asserts what holds whatever the timing: both phases and priorities were sent,
 * and every task got one final answer, counted by the client and by the balancer alike.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { PriorityResult } from '../src/priority';
import { runSmoke } from './smoke-run';

const timeoutMs = 60_000;

test('the priority benchmark runs end to end in smoke mode and every task gets one final answer', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<PriorityResult>(t, 'priority', timeoutMs);

  assert.equal(result.benchmark, 'priority');
  assert.equal(result.mode, 'smoke');
  assert.equal(result.runs.length, result.settings.repetitions);
  for (const run of result.runs) {
    for (const phase of [run.steady, run.spike]) {
      assert.ok(phase.userPresent.sent > 0 && phase.background.sent > 0, JSON.stringify(phase));
      assert.ok(phase.userPresent.ran > 0, `no user-present task ran: ${JSON.stringify(phase.userPresent)}`);
    }
    // The spike multiplies background tasks.
    assert.ok(run.spike.background.sent > run.steady.background.sent * (result.settings.spikeMs / result.settings.steadyMs), JSON.stringify(run));
    // Each task got one final answer: the balancer counted as many as the generators sent.
    assert.equal(
      run.balancerAnswers,
      run.sent,
      `the balancer answered ${run.balancerAnswers} of ${run.sent}: ${JSON.stringify(run.balancerAnswersByPriorityAndOutcome)}`,
    );
  }
  assert.ok(Number.isFinite(result.userPresentP99Ratio.median) && result.userPresentP99Ratio.median > 0);
  for (const goal of result.goals) assert.equal(typeof goal.met, 'boolean');
});
