import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { payloadSleepFactor, taskRandom } from '../src/fleet/sleep-handlers';

test('a task-seeded draw depends on the sequence number only, and is uniform in [0, 1)', () => {
  const first = (id: string) => taskRandom(id)();
  // The same sequence number under another run id (another policy's generator) draws the same.
  assert.equal(first('1234-1-42'), first('999-3-42'));
  assert.deepEqual([0, 1, 2].map(taskRandom('a-7')), [0, 1, 2].map(taskRandom('b-7')));
  assert.notEqual(first('1-1-42'), first('1-1-43'));
  const draws = Array.from({ length: 20_000 }, (_unused, i) => first(`run-${i}`));
  assert.ok(draws.every((u) => u >= 0 && u < 1));
  const mean = draws.reduce((sum, u) => sum + u, 0) / draws.length;
  assert.ok(Math.abs(mean - 0.5) < 0.01, `mean ${mean}`);
  const lowTenth = draws.filter((u) => u < 0.1).length / draws.length;
  assert.ok(Math.abs(lowTenth - 0.1) < 0.01, `share below 0.1: ${lowTenth}`);
});

test("a task's payload may carry its own slowdown; an empty or other payload changes nothing", () => {
  assert.equal(payloadSleepFactor(Buffer.alloc(0)), 1);
  assert.equal(payloadSleepFactor(Buffer.from('hello')), 1);
  assert.equal(payloadSleepFactor(Buffer.from('{"sleepMs": 30}')), 1);
  assert.equal(payloadSleepFactor(Buffer.from('{"sleepFactor": 10}')), 10);
  assert.equal(payloadSleepFactor(Buffer.from('{"sleepFactor": -2}')), 1);
  assert.equal(payloadSleepFactor(Buffer.from('{not json')), 1);
});
