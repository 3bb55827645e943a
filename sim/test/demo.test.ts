import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { freePort, testRedisUrl, uniquePrefix } from '@headroom/common/dist/src/testing';
import { Ledger, clusterKeys, connectRedis } from '@headroom/fleet';

const demoCli = path.join(__dirname, '..', 'src', 'demo', 'cli.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the demo launcher to its end; kills it (and so, through exit-with-parent, its children) on timeout. */
function runDemo(args: string[], env: NodeJS.ProcessEnv = process.env, timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [demoCli, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`demo still running after ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** "done N" of each status line, by cluster. */
function completedByCluster(stdout: string): Record<string, number[]> {
  const done: Record<string, number[]> = {};
  for (const match of stdout.matchAll(/^\s+(baseline|candidate)\s+\d+ workers, capacity \d+, in flight \d+, free -?\d+\s+\| done (\d+)/gm)) {
    (done[match[1]!] ??= []).push(Number(match[2]));
  }
  return done;
}

test('npm start runs the whole system, shows its status, and stops cleanly by itself', { timeout: 35_000 }, async (t) => {
  const keyPrefix = uniquePrefix('demo');
  const port = await freePort();
  const redis = connectRedis(testRedisUrl);
  t.after(async () => {
    await redis.del(...['baseline', 'candidate'].flatMap((cluster) => clusterKeys(keyPrefix, cluster).all));
    redis.disconnect();
  });
  const run = await runDemo([
    '--duration-s', '6',
    '--balancer-port', String(port),
    '--key-prefix', keyPrefix,
    '--redis-url', testRedisUrl,
    '--baseline-workers', '2',
    '--candidate-workers', '1',
    '--candidate-parallelism', '4',
    '--status-interval-s', '2',
  ]);
  const output = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.code, 0, output);
  assert.match(run.stdout, new RegExp(`Ledger key prefix: ${keyPrefix}`));
  assert.match(run.stdout, /starting Redis\.\.\. ok/);
  assert.match(run.stdout, /baseline worker 2\/2 ready/);
  assert.match(run.stdout, /candidate worker 1\/1 ready/);
  assert.match(run.stdout, new RegExp(`Balancer: 127\\.0\\.0\\.1:${port}`));
  const done = completedByCluster(run.stdout);
  for (const cluster of ['baseline', 'candidate']) {
    assert.ok((done[cluster] ?? []).some((n) => n > 0), `${cluster} completed no tasks:\n${output}`);
  }
  assert.match(run.stdout, /stopping \(--duration-s 6 elapsed\)\n {2}load generator\.\.\. ok[\s\S]* {2}balancer\.\.\. ok\n {2}3 workers \(draining\)\.\.\. ok/);
  assert.match(run.stdout, new RegExp(`ledger: no workers left under ${keyPrefix}`));

  const pids = [...run.stdout.matchAll(/pid (\d+)/g)].map((match) => Number(match[1]));
  assert.equal(pids.length, 5, 'balancer, 3 workers and the load generator');
  assert.deepEqual(pids.filter(isRunning), [], 'no process outlives the demo');

  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  const ledger = new Ledger(redis, { keyPrefix });
  for (const cluster of ['baseline', 'candidate']) assert.deepEqual((await ledger.snapshot(cluster)).workers, []);
});

test('when nothing answers at the Redis URL, a private redis-server is started and stopped', { timeout: 35_000 }, async () => {
  const nothingThere = `redis://127.0.0.1:${await freePort()}`;
  const run = await runDemo(['--duration-s', '1', '--balancer-port', '0', '--baseline-workers', '2', '--candidate-workers', '1', '--redis-url', nothingThere]);
  assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
  const started = /starting a private .*redis-server\.\.\. ok \(redis:\/\/127\.0\.0\.1:\d+, pid (\d+)\)/.exec(run.stdout);
  assert.ok(started, run.stdout);
  assert.match(run.stdout, / {2}private Redis\.\.\. ok/);
  const pids = [...run.stdout.matchAll(/pid (\d+)/g)].map((match) => Number(match[1]));
  assert.equal(pids.length, 6, 'Redis, balancer, 3 workers and the load generator');
  assert.deepEqual(pids.filter(isRunning), []);
});

test('an invalid option exits 2 with a message naming it and what it accepts', async () => {
  const flag = await runDemo(['--baseline-workers', '0']);
  assert.equal(flag.code, 2);
  assert.match(flag.stderr, /--baseline-workers: got "0", expected a number >= 1/);
  assert.equal(flag.stdout, '');

  const env = await runDemo([], { ...process.env, HEADROOM_DEMO_CANDIDATE_PERCENT: '150' });
  assert.equal(env.code, 2);
  assert.match(env.stderr, /HEADROOM_DEMO_CANDIDATE_PERCENT \(env\): got "150", expected a percentage from 0 to 100/);

  const unknown = await runDemo(['--workers', '3']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /Unknown option '--workers'/);
});

test('without Redis and without redis-server it says how to get Redis and exits 1', async () => {
  const nothingThere = `redis://127.0.0.1:${await freePort()}`;
  const run = await runDemo([], { ...process.env, PATH: '/nonexistent', REDIS_URL: nothingThere });
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stderr, new RegExp(`nothing answers at ${nothingThere}, and redis-server is not on the PATH`));
  assert.match(run.stderr, /apt-get install redis-server/);
  assert.match(run.stderr, /REDIS_URL=/);
});
