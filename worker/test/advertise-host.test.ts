import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import pino from 'pino';
import { deleteKeysUnder, eventually, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, connectRedis } from '@headroom/fleet';
import { createWorker } from '../src/index';

// ".invalid" never resolves (RFC 6761): a typo of a host name, without depending on outside DNS.
const badHost = 'wrokr-7.headroom.invalid';

test('a worker whose advertised host does not resolve refuses to start, naming the setting and the value', async (t) => {
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('advertise');
  t.after(async () => {
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  await assert.rejects(
    createWorker({ cluster: 'c', workerId: 'typo', advertiseHost: badHost }, { redis, handlers: { echo: async () => 'ok' }, ledger: { keyPrefix } }),
    (error: Error & { code?: string }) => {
      assert.equal(error.code, 'HR_ERR_CONFIG');
      assert.match(error.message, /advertiseHost \(--advertise-host, env HEADROOM_ADVERTISE_HOST\): got "wrokr-7\.headroom\.invalid", it does not resolve/);
      return true;
    },
  );
  assert.equal((await new Ledger(redis, { keyPrefix }).snapshot('c')).workers.length, 0, 'it never entered the ledger');
  await assert.rejects(
    createWorker({ cluster: 'c', advertiseHost: '10.1.2.3:7800' }, { redis, handlers: { echo: async () => 'ok' }, ledger: { keyPrefix } }),
    /advertiseHost .*: got "10\.1\.2\.3:7800", expected a host without a port/,
  );
  await assert.rejects(
    createWorker({ cluster: 'c', advertiseHost: '0.0.0.0' }, { redis, handlers: { echo: async () => 'ok' }, ledger: { keyPrefix } }),
    /advertiseHost .*: got "0\.0\.0\.0", which no balancer can dial/,
  );
  // A name that resolves is advertised with the port the server bound.
  const worker = await createWorker(
    { cluster: 'c', workerId: 'named', advertiseHost: 'localhost' },
    { redis, handlers: { echo: async () => 'ok' }, ledger: { keyPrefix } },
  );
  t.after(() => worker.destroy());
  assert.match(worker.address, /^localhost:\d+$/);
  assert.notEqual(worker.address, 'localhost:0');
});

test('a worker hears from its heartbeat that balancers marked it unreachable, and logs it at warn', async (t) => {
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('advertise');
  const lines: { level: number; msg: string; address?: string }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as (typeof lines)[number]) });
  const worker = await createWorker(
    { cluster: 'c', workerId: 'w', heartbeatIntervalMs: 100 },
    { redis, handlers: { echo: async () => 'ok' }, ledger: { keyPrefix }, logger },
  );
  t.after(async () => {
    await worker.destroy();
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  const ledger = new Ledger(redis, { keyPrefix });
  assert.equal((await ledger.markUnreachable('c', 'w', 60_000, 1)).result, 'marked');
  const warned = await eventually('the warning', 2000, () => lines.find((l) => l.level === 40 && /balancers cannot connect to this worker/.test(l.msg)));
  assert.equal(warned.address, worker.address);
  await ledger.clearUnreachable('c', 'w');
  await eventually('the all-clear', 2000, () => lines.find((l) => l.level === 30 && /balancers send this worker tasks again/.test(l.msg)));
  assert.equal(lines.filter((l) => l.level === 40).length, 1, 'warned once, not at every heartbeat');
});

test('the worker CLI exits 2 when --advertise-host does not resolve', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-advertise-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const handlers = path.join(dir, 'handlers.js');
  fs.writeFileSync(handlers, 'exports.handlers = { echo: async (task) => task.payload };\n');
  const cli = path.join(__dirname, '..', 'src', 'cli.js');
  const run = (args: string[], env: Record<string, string> = {}) =>
    spawnSync(
      process.execPath,
      [cli, '--cluster', 'c', '--handlers', handlers, '--key-prefix', uniquePrefix('advertise-cli'), '--redis-url', testRedisUrl, ...args],
      {
        env: { ...process.env, LOG_LEVEL: 'warn', ...env },
        encoding: 'utf8',
        timeout: 20_000,
      },
    );
  let result = run(['--advertise-host', badHost]);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /advertiseHost \(--advertise-host, env HEADROOM_ADVERTISE_HOST\): got "wrokr-7\.headroom\.invalid", it does not resolve/);
  result = run([], { HEADROOM_ADVERTISE_HOST: badHost });
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /got "wrokr-7\.headroom\.invalid"/);
});
