/**
 * The packages as a team installs them into its own service: `npm pack` of every publishable
 * workspace, the tarballs installed into a new project outside the repository (no workspace
 * links), and from there the commands started and a task submitted with @headroom/client.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnReady, testRedisUrl, uniquePrefix } from '@headroom/testkit';

const repoRoot = path.join(__dirname, '..', '..', '..');
const publishable = ['common', 'proto', 'fleet', 'flags', 'worker', 'balancer', 'client', 'control-plane'];

/** The service's own handlers: what a team writes. */
const handlersModule = `
exports.handlers = {
  echo: async (task) => task.payload,
  hold: (task, signal) => new Promise((resolve, reject) => {
    const timer = setTimeout(() => resolve('held'), 3000);
    signal.addEventListener('abort', () => { clearTimeout(timer); reject(signal.reason); }, { once: true });
  }),
};
`;

/** The service's own caller: prints what each submit gave, as JSON. */
const submitScript = `
const { createClient, HeadroomClientError } = require('@headroom/client');
const client = createClient({ balancers: [process.argv[2]], retry: { maxAttempts: 1 } });
const outcome = (promise) => promise.then(
  (answer) => ({ result: answer.result.toString(), worker: answer.placement.workerId }),
  (error) => ({ error: error.name, code: error.code, typed: error instanceof HeadroomClientError }),
);
(async () => {
  const echo = await outcome(client.submit({ integration: 'echo', key: 'a', payload: 'hello' }));
  const badTask = await outcome(client.submit({ integration: 'Not An Integration', key: 'a' }));
  // One slot and one queue place: the third of three held tasks finds the queue full.
  const held = [1, 2, 3].map((i) => outcome(client.submit({ integration: 'hold', key: 'h' + i, deadlineMs: 10000 })));
  const settled = await Promise.all(held);
  console.log(JSON.stringify({ echo, badTask, held: settled }));
  client.close();
})();
`;

test('the packed packages install into a project of their own: its handlers run under headroom-worker, behind headroom-balancer, called with @headroom/client', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-packages-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const tarballs = path.join(dir, 'tarballs');
  fs.mkdirSync(tarballs);
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', tarballs, ...publishable.flatMap((name) => ['--workspace', `@headroom/${name}`])], {
      cwd: repoRoot,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  ) as Array<{ name: string; filename: string; files: Array<{ path: string }> }>;
  assert.deepEqual(packed.map((p) => p.name).sort(), publishable.map((name) => `@headroom/${name}`).sort());
  for (const pkg of packed) {
    const files = pkg.files.map((f) => f.path);
    assert.ok(files.includes('dist/src/index.js') && files.includes('dist/src/index.d.ts'), `${pkg.name} ships its code and types`);
    assert.deepEqual(
      files.filter((f) => f.startsWith('dist/test') || f.startsWith('src/') || f.startsWith('test/')),
      [],
      `${pkg.name} ships no tests or sources`,
    );
  }
  assert.ok(
    packed.find((p) => p.name === '@headroom/control-plane')!.files.some((f) => f.path === 'ui-dist/index.html'),
    'the control plane ships the built admin UI',
  );

  const app = path.join(dir, 'service');
  fs.mkdirSync(app);
  const dependencies = Object.fromEntries(packed.map((p) => [p.name, `file:${path.join(tarballs, p.filename)}`]));
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'a-service', version: '1.0.0', private: true, dependencies }, null, 2));
  fs.writeFileSync(path.join(app, 'handlers.js'), handlersModule);
  fs.writeFileSync(path.join(app, 'submit.js'), submitScript);
  // Third-party packages come from npm's cache, filled by the repository's own install.
  const install = spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel', 'error'], {
    cwd: app,
    encoding: 'utf8',
    timeout: 240_000,
  });
  assert.equal(install.status, 0, `npm install of the tarballs: ${install.stderr}`);
  assert.ok(!fs.lstatSync(path.join(app, 'node_modules', '@headroom', 'worker')).isSymbolicLink(), 'installed from the tarball, not linked to the workspace');

  const bin = (name: string) => path.join(app, 'node_modules', '.bin', name);
  const help = spawnSync('npx', ['headroom-balancer', '--help'], { cwd: app, encoding: 'utf8', timeout: 60_000 });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^Usage: headroom-balancer/);

  const keyPrefix = uniquePrefix('packages');
  const redisArgs = ['--redis-url', testRedisUrl, '--key-prefix', keyPrefix];
  const worker = await spawnReady(t, bin('headroom-worker'), [
    '--cluster',
    'baseline',
    '--handlers',
    path.join(app, 'handlers.js'),
    '--max-parallelism',
    '1',
    '--heartbeat-interval-ms',
    '200',
    ...redisArgs,
  ]);
  const balancer = await spawnReady(t, bin('headroom-balancer'), ['--max-queued-tasks', '1', ...redisArgs]);
  const submitted = spawnSync(process.execPath, ['submit.js', balancer.ready.address], { cwd: app, encoding: 'utf8', timeout: 30_000 });
  assert.equal(submitted.status, 0, submitted.stderr);
  const outcomes = JSON.parse(submitted.stdout) as { echo: unknown; badTask: unknown; held: Array<Record<string, unknown>> };
  assert.deepEqual(outcomes.echo, { result: 'hello', worker: worker.ready.workerId });
  assert.deepEqual(outcomes.badTask, { error: 'InvalidTaskError', code: 'HR_ERR_INVALID_TASK', typed: true });
  assert.deepEqual(
    outcomes.held.map((o) => o.result ?? o.error).sort(),
    ['QueueFullError', 'held', 'held'],
    `one ran, one waited its turn, the third found the queue full: ${JSON.stringify(outcomes.held)}`,
  );
  assert.equal(outcomes.held.find((o) => o.error)!.code, 'HR_ERR_QUEUE_FULL');
});
