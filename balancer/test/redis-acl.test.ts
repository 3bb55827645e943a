/**
 * Redis with a password and an ACL user confined to Headroom's keys: the fleet works through
 * the credentials in REDIS_URL, which proves every key and channel Headroom touches is under
 * `{<prefix>` (what docs/security.md says); wrong credentials stop a CLI at once, exit 2, with
 * Redis's reason and without echoing the password. And Redis over TLS (rediss://).
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { cliPaths, freePort, handlersPaths, spawnReady, startFleet, startPrivateRedis, submit, task } from '@headroom/testkit';
import { Ledger, WorkerReports, connectRedis, controlKeys, keyspacePattern, latencyKeys, reportKeys, waitUntilReady } from '@headroom/fleet';
import { makeCertificates } from './certificates';

const password = 'ACL-pass-0123456789';
const workerCli = cliPaths.worker;
const keyPrefix = 'acl-fleet';

test('a fleet runs as an ACL user allowed only keys and channels under its prefix; wrong credentials fail fast, named and redacted', async (t) => {
  const redis = await startPrivateRedis([
    // No anonymous access; "headroom" may touch only {acl-fleet...} keys and channels.
    '--user',
    'default',
    'off',
    '--user',
    'headroom',
    'on',
    `>${password}`,
    `~{${keyPrefix}*`,
    `&{${keyPrefix}*`,
    '+@all',
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
  const keys = await fleet.redis.keys(keyspacePattern(keyPrefix));
  for (const hashTag of [latencyKeys(keyPrefix).hashTag, reportKeys(keyPrefix).hashTag, controlKeys(keyPrefix).hashTag]) {
    assert.ok(
      keys.some((key) => key.startsWith(hashTag)),
      `${hashTag} keys: ${keys.join(', ')}`,
    );
  }

  const wrong = spawnSync(
    process.execPath,
    [workerCli, '--cluster', 'baseline', '--handlers', handlersPaths.demo, '--redis-url', `redis://headroom:not-the-${password}@127.0.0.1:${redis.port}`],
    { encoding: 'utf8', timeout: 8000 },
  );
  assert.equal(wrong.status, 2, wrong.stderr);
  assert.match(wrong.stderr, /--redis-url: could not use Redis at redis:\/\/headroom:\*\*\*@127\.0\.0\.1:\d+: WRONGPASS/);
  assert.doesNotMatch(wrong.stderr, new RegExp(password));
});

test('Redis over TLS: rediss:// in REDIS_URL, trusting the CA through NODE_EXTRA_CA_CERTS', async (t) => {
  const { file } = makeCertificates(t);
  const tlsPort = await freePort();
  const redis = await startPrivateRedis([
    '--tls-port',
    String(tlsPort),
    '--tls-cert-file',
    file('server.pem'),
    '--tls-key-file',
    file('server.key'),
    '--tls-ca-cert-file',
    file('ca.pem'),
    '--tls-auth-clients',
    'no',
  ]);
  t.after(() => redis.stop(true));
  await spawnReady(
    t,
    workerCli,
    ['--cluster', 'baseline', '--worker-id', 'tls-redis-worker', '--handlers', handlersPaths.demo, '--redis-url', `rediss://127.0.0.1:${tlsPort}`],
    15_000,
    {
      NODE_EXTRA_CA_CERTS: file('ca.pem'),
    },
  );
  // It registered in the ledger through the TLS port: read it back over TLS too.
  const reader = connectRedis(`rediss://127.0.0.1:${tlsPort}`, { tls: { ca: fs.readFileSync(file('ca.pem')) } });
  t.after(() => reader.disconnect());
  await waitUntilReady(reader);
  const snapshot = await new Ledger(reader, { keyPrefix: 'hr' }).snapshot('baseline');
  assert.deepEqual(
    snapshot.workers.map((w) => w.workerId),
    ['tls-redis-worker'],
  );
});
