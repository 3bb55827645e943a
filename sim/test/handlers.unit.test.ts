import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { TaskContext } from '@headroom/worker';
import { handlers, invalidPayloadCode } from '../src/handlers/demo';
import { maxAnswerKb, processUpstreamAnswer, upstreamAnswerJson } from '../src/handlers/upstream-answer';

function demoTask(payload: unknown): TaskContext {
  const task: Omit<TaskContext, 'httpAgent'> = {
    id: 'task-1',
    key: 'key-1',
    integration: 'bank-a',
    priority: 'BACKGROUND',
    payload: Buffer.from(JSON.stringify(payload)),
    deadlineUnixMs: Date.now() + 10_000,
    idempotent: false,
    cluster: 'candidate',
    workerId: 'worker-1',
  };
  // The demo handlers make no upstream calls: they never touch the HTTP agent.
  return task as TaskContext;
}

const run = async (payload: unknown, signal = new AbortController().signal) =>
  JSON.parse(String(await handlers['*']!(demoTask(payload), signal))) as Record<string, unknown>;

test('without allocateKb the demo handler answers as before', async () => {
  assert.deepEqual(await run({ sleepMs: 1 }), { taskId: 'task-1', workerId: 'worker-1', cluster: 'candidate' });
});

test('allocateKb builds, reshapes and serialises an upstream answer of that size, held across the sleep', async () => {
  const startedAt = performance.now();
  const result = await run({ allocateKb: 64, sleepMs: 20 });
  assert.ok(performance.now() - startedAt >= 19, 'it still sleeps');
  assert.equal(result.taskId, 'task-1');
  const answerBytes = result.answerBytes as number;
  assert.ok(answerBytes >= 64 * 1024 && answerBytes < 64 * 1024 + 1024, `answer of ${answerBytes} bytes`);
  assert.ok((result.statementLines as number) > 100, `${String(result.statementLines)} lines`);
  assert.ok((result.statementBytes as number) > 0);
});

test('the upstream answer is valid JSON of at least the size asked for, and each record is reshaped', () => {
  const json = upstreamAnswerJson(10_000, 'seed');
  assert.ok(json.length >= 10_000 && json.length < 10_500, `${json.length} bytes`);
  const records = JSON.parse(json) as { id: string }[];
  assert.equal(records[0]!.id, 'seed-0');
  const processed = processUpstreamAnswer(10, 'seed');
  assert.equal(processed.statement.length, processed.document.length);
  assert.deepEqual(Object.keys(processed.statement[0]!), ['transactionId', 'date', 'amount', 'currency', 'description']);
  assert.deepEqual(JSON.parse(processed.statementJson), processed.statement);
});

test('an allocateKb out of range fails the task with a code naming the field', async () => {
  for (const allocateKb of [0, -1, maxAnswerKb + 1, 'lots']) {
    await assert.rejects(run({ allocateKb }), (error: { code?: string; message?: string }) => {
      assert.equal(error.code, invalidPayloadCode);
      assert.equal(error.message, `allocateKb: got ${JSON.stringify(allocateKb)}, expected a number from 1 to ${maxAnswerKb}`);
      return true;
    });
  }
});

test('the sleep still ends when the task is aborted', async () => {
  const controller = new AbortController();
  const running = run({ allocateKb: 8, sleepMs: 10_000 }, controller.signal);
  controller.abort(new Error('deadline'));
  await assert.rejects(running, { name: 'AbortError' });
});
