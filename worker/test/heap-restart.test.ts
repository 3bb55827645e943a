import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cliPaths, eventually, handlersPaths, spawnReady, testRedisUrl, uniquePrefix } from '@headroom/testkit';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test('a worker started again with heap flags stops when the command that started it is killed with SIGKILL', async (t) => {
  const worker = await spawnReady(t, cliPaths.worker, [
    '--cluster',
    'c',
    '--handlers',
    handlersPaths.demo,
    '--max-old-space-size-mb',
    '64',
    '--redis-url',
    testRedisUrl,
    '--key-prefix',
    uniquePrefix('heap-restart'),
  ]);
  // The command runs the worker as its child, with --max-old-space-size.
  const children = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(worker.child.pid)], { encoding: 'utf8' })
    .trim()
    .split('\n');
  assert.equal(children.length, 1, children.join('\n'));
  assert.match(children[0]!, /--max-old-space-size=64/);
  const workerPid = Number(children[0]!.trim().split(/\s+/)[0]);
  await worker.kill('SIGKILL');
  await eventually('the restarted worker to stop', 10_000, () => (alive(workerPid) ? undefined : true));
});
