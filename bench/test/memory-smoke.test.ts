/**
 * Keeps the memory benchmark from rotting: runs it in smoke mode (2,000 queued tasks) as its own
 * process, as `npm run bench -- memory --smoke` would, and checks the JSON it writes. It asserts
 * what holds whatever the timing: the queue filled to its limit and not past it, the tasks beyond
 * it were refused with HR_ERR_QUEUE_FULL, and the queue emptied when the clients went away.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { MemoryResult } from '../src/memory';
import { runSmoke } from './smoke-run';

const timeoutMs = 60_000;

test('the memory benchmark runs end to end in smoke mode: the queue fills to its limit and refuses the rest', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<MemoryResult>(t, 'memory', timeoutMs);

  assert.equal(result.benchmark, 'memory');
  assert.equal(result.mode, 'smoke');
  const { maxQueuedTasks, tasksBeyondLimit } = result.settings;
  for (const r of result.runs) {
    assert.equal(r.empty.queued, 0);
    assert.equal(r.maxQueued, maxQueuedTasks, `the queue held at most ${r.maxQueued}`);
    assert.equal(r.full.queued, maxQueuedTasks);
    assert.ok(r.refusedQueueFull >= tasksBeyondLimit, `refused ${r.refusedQueueFull} of ${tasksBeyondLimit}`);
    assert.equal(r.afterCancel.queued, 0, 'the queue did not empty when the clients went away');
    for (const s of [r.empty, r.full, r.afterRefusals, r.afterCancel]) assert.ok(s.rssBytes > 0 && s.heapUsedBytes > 0, JSON.stringify(s));
    assert.ok(Number.isFinite(r.rssBytesPerQueuedTask) && Number.isFinite(r.heapBytesPerQueuedTask));
    // A step from empty to each depth mark, and one to full.
    assert.equal(r.steps.length, result.settings.depthMarks.length + 1, JSON.stringify(r.steps));
  }
  for (const goal of result.goals) assert.ok(typeof goal.met === 'boolean' || goal.met === 'stated', JSON.stringify(goal));
});
