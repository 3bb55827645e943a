/**
 * Redis with a password and an ACL user confined to Headroom's keys: the fleet works through
 * the credentials in REDIS_URL, which proves every key and channel Headroom touches is under
 * `{<prefix>` (what the README says); wrong credentials stop a CLI at once, exit 2, with
 * Redis's reason and without echoing the password.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { startPrivateRedis } from '@headroom/common/dist/src/testing';
import { WorkerReports } from '@headroom/fleet';
import { demoHandlersPath, startFleet, submit, task } from './harness';

const password = 'ACL-pass-0123456789';
const keyPrefix = 'acl-fleet';

test('a fleet runs as an ACL user allowed only keys and channels under its prefix; wrong credentials fail fast, named and redacted', async (t) => {
  const redis = await startPrivateRedis([
    // No anonymous access; "headroom" may touch only {acl-fleet...} keys and channels.
    '--user', 'default', 'off',
    '--user', 'headroom', 'on', `>${password}`, `~{${keyPrefix}*`, `&{${keyPrefix}*`, '+@all',
  ]);
  t.after(() => redis.stop(true));
  const url = `redis://headroom:${password}@127.0.0.1:${redis.port}`;

  const fleet = await startFleet(t, { keyPrefix }, url);
  await fleet.addWorker({ cluster: 'baseline', workerId: 'acl-worker', maxParallelism: 2, reportIntervalMs: 200, latencyReportIntervalMs: 200 });
  await fleet.addBalancer({ balancerHeartbeatIntervalMs: 200 });
  for (let i = 0; i < 5; i++) {
    const result = await submit(fleet.clients[0]!, task({ integration: 'echo', payload: Buffer.from(`t${i}`) }));
    assert.ok(result.ok && !result.response.error, JSON.stringify(result));
  }
  // Reports, latency slots, heartbeats and the override register all went through the ACL.
  const reports = new WorkerReports(fleet.redis, keyPrefix);
  await new Promise((resolve) => setTimeout(resolve, 600));
  assert.ok((await reports.read(['acl-worker'])).has('acl-worker'));
  const keys = await fleet.redis.keys(`{${keyPrefix}*`);
  for (const kind of ['latency', 'reports', 'control']) assert.ok(keys.some((key) => key.startsWith(`{${keyPrefix}:${kind}}`)), `${kind} keys: ${keys.join(', ')}`);

  const workerCli = path.join(__dirname, '..', '..', '..', 'worker', 'dist', 'src', 'cli.js');
  const wrong = spawnSync(process.execPath, [workerCli, '--cluster', 'baseline', '--handlers', demoHandlersPath, '--redis-url', `redis://headroom:not-the-${password}@127.0.0.1:${redis.port}`], { encoding: 'utf8', timeout: 8000 });
  assert.equal(wrong.status, 2, wrong.stderr);
  assert.match(wrong.stderr, /redisUrl: could not use Redis at redis:\/\/headroom:\*\*\*@127\.0\.0\.1:\d+: WRONGPASS/);
  assert.doesNotMatch(wrong.stderr, new RegExp(password));
});
