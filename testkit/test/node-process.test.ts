/**
 * The process spawner (src/node-process.ts) on real processes: small fixtures (fixtures/) stand
 * in for Headroom's commands.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { isHeadroomError } from '@headroom/common';
import { NodeProcess, ProcessNotReadyError, eventually, isProcessAlive, startNodeProcess } from '@headroom/testkit';

const childScript = path.join(__dirname, 'fixtures', 'child.js');
const parentScript = path.join(__dirname, 'fixtures', 'parent.js');

test('a child that never prints its ready line: a coded error naming it, with its last output lines', async (t) => {
  const child = new NodeProcess({ name: 'never-ready', script: childScript, args: ['never-ready'] });
  t.after(() => child.killNow());
  await assert.rejects(child.waitUntilReady(1500), (error: unknown) => {
    assert.ok(error instanceof ProcessNotReadyError && isHeadroomError(error, 'HR_ERR_PROCESS_NOT_READY'), String(error));
    assert.match(error.message, new RegExp(`^never-ready \\(pid ${child.pid}\\) printed no "ready" event within 1500 ms; its last 3 lines:`));
    for (const line of ['starting, plain text', 'WARN waiting for a dependency {"dependency":"nothing"}', 'still waiting for something']) {
      assert.ok(error.message.includes(`\n  ${line}`), `the message shows "${line}": ${error.message}`);
    }
    assert.equal(error.exit, undefined);
    return true;
  });
  assert.ok(child.running, 'waiting gave up; the child was not stopped by it');
  const outcome = await child.stop(5000);
  assert.deepEqual(outcome, { exit: { code: null, signal: 'SIGTERM' }, forced: false });
  assert.ok(!isProcessAlive(child.pid));
});

test('a child that exits before its ready line: the error says how it exited, with its last lines', async () => {
  await assert.rejects(startNodeProcess({ name: 'exit-early', script: childScript, args: ['exit-early'], readyTimeoutMs: 15_000 }), (error: unknown) => {
    assert.ok(error instanceof ProcessNotReadyError, String(error));
    assert.deepEqual(error.exit, { code: 3, signal: null });
    assert.match(
      error.message,
      /^exit-early \(pid \d+\) exited \(code 3\) before it printed a "ready" event; its last line:\n {2}cannot start: a bad setting$/,
    );
    return true;
  });
});

test('ready by url, events, a log file, forwarded lines; stop is idempotent and forces a child that ignores SIGTERM', async (t) => {
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-node-process-'));
  t.after(() => fs.rmSync(logDir, { recursive: true, force: true }));
  const forwarded: string[] = [];
  const child = new NodeProcess({ name: 'ready-child', script: childScript, args: ['ready'], logDir, forward: (line) => forwarded.push(line) });
  t.after(() => child.killNow());
  const ticks: unknown[] = [];
  child.onEvent((event) => event.event === 'tick' && ticks.push(event.count));
  const ready = await child.waitUntilReady(15_000);
  assert.equal(ready.address, 'http://127.0.0.1:1');
  assert.equal(ready.pid, child.pid);
  assert.equal((await child.waitForEvent('ready', 10)).url, 'http://127.0.0.1:1', 'the ready line is kept for a late waiter');

  const stopping = child.stop(5000);
  assert.equal(child.stop(1), stopping, 'a second stop gets the first one');
  assert.deepEqual(await stopping, { exit: { code: 0, signal: null }, forced: false });
  assert.deepEqual(ticks, [1]);
  assert.deepEqual(forwarded, ['[ready-child] after the ready line']);
  assert.deepEqual(child.recentOutput(), ['after the ready line']);
  assert.equal(child.logPath, path.join(logDir, 'ready-child.log'));
  const logged = fs.readFileSync(child.logPath!, 'utf8').split('\n');
  assert.deepEqual(logged.slice(1), ['{"event":"tick","count":1}', 'after the ready line', '']);
  assert.match(logged[0]!, /^\{"event":"ready","url":"http:\/\/127\.0\.0\.1:1","pid":\d+\}$/);

  const stubborn = await startNodeProcess({ name: 'stubborn', script: childScript, args: ['ignore-sigterm'], readyTimeoutMs: 15_000 });
  t.after(() => stubborn.process.killNow());
  assert.equal(stubborn.ready.address, '127.0.0.1:1');
  assert.deepEqual(await stubborn.process.stop(300), { exit: { code: null, signal: 'SIGKILL' }, forced: true });
});

test('a child stops when its parent is killed with SIGKILL (exit-with-parent)', async (t) => {
  const { process: parent, ready } = await startNodeProcess({ name: 'parent', script: parentScript, readyTimeoutMs: 15_000 });
  t.after(() => parent.killNow());
  const childPid = Number(ready.childPid);
  assert.ok(Number.isInteger(childPid) && isProcessAlive(childPid), `the parent's child runs: ${JSON.stringify(ready)}`);
  t.after(() => {
    if (isProcessAlive(childPid)) process.kill(childPid, 'SIGKILL');
  });
  assert.deepEqual(await parent.kill('SIGKILL'), { code: null, signal: 'SIGKILL' });
  await eventually(`the child (pid ${childPid}) exits after its parent was killed`, 5000, () => (isProcessAlive(childPid) ? undefined : true));
});
