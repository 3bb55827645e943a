/**
 * Keeps the autopilot benchmark from rotting: runs it in smoke mode (one repetition) as its own
 * process, as `npm run bench -- autopilot --smoke` would, and checks the JSON it writes. It
 * asserts what the autopilot must do (roll the slow integration back alone, every balancer
 * acknowledging), never how fast.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { AutopilotResult } from '../src/autopilot';
import { runSmoke } from './smoke-run';

const timeoutMs = 110_000;

test(
  'the autopilot benchmark runs end to end in smoke mode: the slow integration alone rolled back, acknowledged by every balancer',
  { timeout: timeoutMs + 15_000 },
  async (t) => {
    const result = await runSmoke<AutopilotResult>(t, 'autopilot', timeoutMs);

    assert.equal(result.benchmark, 'autopilot');
    assert.equal(result.mode, 'smoke');
    assert.equal(result.samples.length, result.settings.repetitions);
    for (const sample of result.samples) {
      assert.deepEqual(sample.rolledBack, [result.settings.slowIntegration]);
      assert.equal(sample.acknowledgedBy.length, result.settings.balancerCount, JSON.stringify(sample));
      assert.match(sample.decision, /p50Ratio \d+(\.\d+)? > /);
      assert.ok(sample.toDecisionMs > 0 && sample.toLastAckMs >= sample.toDecisionMs, JSON.stringify(sample));
    }
    assert.equal(result.slowAloneEveryTime, true);
    assert.equal(result.toLastAck.count, result.settings.repetitions);
    assert.ok(result.load.succeeded > 0, 'no load');
    assert.deepEqual(
      result.goals.map((goal) => typeof goal.met),
      result.goals.map(() => 'boolean'),
    );
  },
);
