import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as grpc from '@grpc/grpc-js';
import { ConfigError } from '@headroom/common';
import { cliPaths, handlersPaths, startFleet, submit, task } from '@headroom/testkit';
import { createBalancer } from '../src/index';

test('malformed tasks get INVALID_ARGUMENT naming the field, and nothing runs', async (t) => {
  const fleet = await startFleet(t);
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 });
  await fleet.addBalancer({ maxPayloadBytes: 1000, maxTaskTimeoutMs: 60_000 });
  const client = fleet.clients[0]!;
  const cases: [string, Parameters<typeof task>[0], string][] = [
    ['empty id', { id: '' }, 'task.id'],
    ['huge id', { id: 'x'.repeat(129) }, 'task.id'],
    ['empty key', { key: '' }, 'task.key'],
    ['huge key', { key: 'k'.repeat(257) }, 'task.key'],
    ['missing integration', { integration: '' }, 'task.integration'],
    ['bad integration', { integration: 'Bank A<script>' }, 'task.integration'],
    ['unspecified priority', { priority: 'PRIORITY_UNSPECIFIED' }, 'task.priority'],
    ['unknown priority', { priority: 7 as unknown as 'BACKGROUND' }, 'task.priority'],
    ['payload over the limit', { payload: Buffer.alloc(1001) }, 'task.payload'],
    ['negative deadline', { deadlineUnixMs: -5 }, 'task.deadlineUnixMs'],
    ['absurd deadline', { deadlineUnixMs: Date.now() + 365 * 24 * 3600_000 }, 'task.deadlineUnixMs'],
  ];
  for (const [name, overrides, field] of cases) {
    const result = await submit(client, task(overrides));
    assert.ok(!result.ok, `${name}: accepted`);
    assert.equal(result.status, grpc.status.INVALID_ARGUMENT, `${name}: ${result.details}`);
    assert.equal(result.code, 'HR_ERR_INVALID_TASK', name);
    assert.ok(result.details.includes(field), `${name}: "${result.details}" does not name ${field}`);
  }
  // A deadline that passed is not malformed: it expired (a retry can arrive just after it).
  const expired = await submit(client, task({ deadlineUnixMs: Date.now() - 1000 }));
  assert.ok(!expired.ok);
  assert.equal(expired.status, grpc.status.DEADLINE_EXCEEDED, expired.details);
  assert.equal(expired.code, 'HR_ERR_DEADLINE_EXCEEDED');
  assert.match(expired.details, /task\.deadlineUnixMs: the deadline passed \d+ ms before the task arrived/);
  const noTask = await new Promise<grpc.ServiceError | null>((resolve) => client.submit({}, (error) => resolve(error)));
  assert.equal(noTask?.code, grpc.status.INVALID_ARGUMENT);
  assert.match(noTask!.details, /task: missing/);
  assert.equal(worker.stats().completed + worker.stats().failed, 0, 'no malformed task reached a worker');
  assert.equal(fleet.balancers[0]!.stats().queue.queued, 0);
  assert.match(
    await fleet.balancers[0]!.registry.metrics(),
    /^headroom_balancer_tasks_total\{cluster="none",integration="none",priority="none",outcome="HR_ERR_INVALID_TASK"\} 12$/m,
  );
  assert.match(
    await fleet.balancers[0]!.registry.metrics(),
    /^headroom_balancer_tasks_total\{cluster="none",integration="none",priority="none",outcome="HR_ERR_DEADLINE_EXCEEDED"\} 1$/m,
  );
  // A good task still works afterwards.
  assert.ok((await submit(client, task())).ok);
});

test('a key that is not valid UTF-8 is refused', async (t) => {
  const fleet = await startFleet(t);
  await fleet.addBalancer();
  // Hand-encoded SubmitRequest { task { id: "x", key: 0xff 0xfe, integration: "bank-a", priority: 1 } }:
  // a generated client cannot send invalid UTF-8 in a string field.
  const taskBytes = Buffer.from([0x0a, 1, 0x78, 0x12, 2, 0xff, 0xfe, 0x1a, 6, ...Buffer.from('bank-a'), 0x20, 1]);
  const request = Buffer.concat([Buffer.from([0x0a, taskBytes.length]), taskBytes]);
  const raw = new grpc.Client(fleet.balancers[0]!.address, grpc.credentials.createInsecure());
  t.after(() => raw.close());
  const error = await new Promise<grpc.ServiceError | null>((resolve) =>
    raw.makeUnaryRequest(
      '/headroom.v1.Balancer/Submit',
      (b: Buffer) => b,
      (b: Buffer) => b,
      request,
      (e) => resolve(e),
    ),
  );
  assert.equal(error?.code, grpc.status.INVALID_ARGUMENT);
  assert.match(error!.details, /task\.key: is not valid UTF-8/);
});

test('a message over the gRPC size limit is refused as an invalid task (not RESOURCE_EXHAUSTED, which says retry) without reaching the balancer logic', async (t) => {
  const fleet = await startFleet(t);
  await fleet.addBalancer({ maxPayloadBytes: 1000 });
  const result = await submit(fleet.clients[0]!, task({ payload: Buffer.alloc(200_000) }));
  assert.ok(!result.ok);
  assert.equal(result.status, grpc.status.INVALID_ARGUMENT);
  assert.equal(result.code, 'HR_ERR_INVALID_TASK');
  assert.match(result.details, /larger than the limit of 66536 bytes \(maxPayloadBytes 1000/);
  assert.equal(fleet.balancers[0]!.stats().queue.queued, 0);
});

test('bad options stop the balancer at start with a message naming the setting', async (t) => {
  const fleet = await startFleet(t);
  const deps = { redis: fleet.redis, subscriber: fleet.redis };
  await assert.rejects(createBalancer({ policy: 'fastest' as 'random' }, deps), (error: unknown) => {
    assert.ok(error instanceof ConfigError);
    assert.match(error.message, /policy: got "fastest", expected one of least-loaded, round-robin, random, power-of-two/);
    return true;
  });
  await assert.rejects(
    createBalancer({ maxQueuedTasks: 0, candidatePercent: 101 }, deps),
    /candidatePercent: got 101, expected a percentage from 0 to 100\n  maxQueuedTasks: got 0, expected a number >= 1/,
  );
  await assert.rejects(createBalancer({ clusters: { baseline: 'x', candidate: 'x' } }, deps), /baseline and candidate must be different/);
  await assert.rejects(createBalancer({ unknownSetting: 1 } as object, deps), /unknown setting\(s\) "unknownSetting"/);
});

test('the CLIs refuse bad flags and env with exit code 2, naming the setting', () => {
  const { balancer: balancerCli, worker: workerCli, controlPlane: controlPlaneCli } = cliPaths;
  const run = (cli: string, args: string[], env: Record<string, string> = {}) =>
    spawnSync(process.execPath, [cli, ...args], { env: { ...process.env, ...env }, encoding: 'utf8', timeout: 20_000 });

  let result = run(balancerCli, ['--policy', 'fastest']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--policy: got "fastest", expected one of least-loaded/);

  result = run(balancerCli, ['--default-integration-limit', '{"share": 1}']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--default-integration-limit: got "\{\\"share\\": 1\}", expected \{"shareOfCapacity": x, "minInFlight": n\} or \{"off": true\}/);
  result = run(balancerCli, ['--default-integration-limit', '{"shareOfCapacity": 0.5, "minInFlight": 8, "maxStartsPerSecond": -3}']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(
    result.stderr,
    /--default-integration-limit: got ".*-3}", expected maxStartsPerSecond to be a number of task starts per second from 0\.001 to 1000000/,
  );
  result = run(balancerCli, [], { HEADROOM_MAX_QUEUED_SHARE_AT_LIMIT: '0' });
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /HEADROOM_MAX_QUEUED_SHARE_AT_LIMIT \(env\): got "0", expected a number above 0/);

  result = run(balancerCli, [], { HEADROOM_MAX_QUEUED_TASKS: 'lots' });
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /HEADROOM_MAX_QUEUED_TASKS \(env\): got "lots", expected a whole number/);

  result = run(workerCli, ['--cluster', 'baseline', '--handlers', 'x.js', '--max-parallelism', '0']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--max-parallelism: got "0", expected a number >= 1/);

  result = run(workerCli, ['--handlers', 'x.js']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--cluster: required \(NAME\)/);

  result = run(workerCli, ['--cluster', 'baseline', '--handlers', 'x.js', '--redis-url', 'http://nope']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--redis-url: got "http:\/\/nope", expected a URL such as redis:\/\/127\.0\.0\.1:6379, or redis\+sentinel:\/\//);
  // Sentinel: the primary's name is required, a sentinel's port must be a port, and a password is never echoed.
  result = run(balancerCli, ['--redis-url', 'redis+sentinel://:s3cret@127.0.0.1:26379']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--redis-url: got "redis\+sentinel:\/\/:\*\*\*@127\.0\.0\.1:26379", expected the primary's name after the sentinels/);
  assert.doesNotMatch(result.stderr, /s3cret/);
  result = run(workerCli, ['--cluster', 'baseline', '--handlers', 'x.js'], { REDIS_URL: 'redis+sentinel://127.0.0.1:99999/mymaster' });
  assert.equal(result.status, 2, result.stderr);
  assert.match(
    result.stderr,
    /REDIS_URL \(env\): got "redis\+sentinel:\/\/127\.0\.0\.1:99999\/mymaster", sentinel "127\.0\.0\.1:99999": expected host or host:port \(port 1-65535\)/,
  );

  // Flags from Unleash: a URL that is not http(s), or no client token with it.
  result = run(balancerCli, ['--unleash-url', 'ftp://flags']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--unleash-url: got "ftp:\/\/flags", expected an http\(s\) URL/);
  result = run(workerCli, ['--cluster', 'baseline', '--handlers', handlersPaths.demo, '--unleash-url', 'http://127.0.0.1:1']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--unleash-client-token \(env UNLEASH_CLIENT_TOKEN\): required with --unleash-url/);

  result = run(controlPlaneCli, ['--unleash-url', 'http://127.0.0.1:1', '--unleash-admin-token', 'x', '--database-url', 'postgres://127.0.0.1:1/none']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--operator-tokens \(env HEADROOM_OPERATOR_TOKENS\): at least one API token is required/);
  result = run(
    controlPlaneCli,
    ['--unleash-url', 'http://127.0.0.1:1', '--unleash-admin-token', 'x', '--database-url', 'postgres://127.0.0.1:1/none', '--integrations', 'Bank A'],
    { HEADROOM_OPERATOR_TOKENS: 'ops=short' },
  );
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--integrations: got "Bank A", expected 1-64 characters of a-z/);
  assert.match(result.stderr, /HEADROOM_OPERATOR_TOKENS \(env\): expected NAME=TOKEN pairs/);
  assert.doesNotMatch(result.stderr, /short/, 'a token is never echoed');

  // TLS: half-given flags, and a certificate file that is not there (checked before anything starts).
  result = run(balancerCli, ['--tls-cert', 'server.pem']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--tls-cert and --tls-key \(env HEADROOM_TLS_CERT, HEADROOM_TLS_KEY\) go together/);
  result = run(workerCli, [
    '--cluster',
    'baseline',
    '--handlers',
    handlersPaths.demo,
    '--tls-cert',
    '/nonexistent/server.pem',
    '--tls-key',
    '/nonexistent/server.key',
  ]);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /tls\.keyFile: cannot read \/nonexistent\/server\.key/);
  result = run(
    controlPlaneCli,
    ['--unleash-url', 'http://127.0.0.1:1', '--unleash-admin-token', 'x', '--database-url', 'postgres://127.0.0.1:1/none', '--worker-tls-cert', 'client.pem'],
    { HEADROOM_OPERATOR_TOKENS: 'ops=0123456789abcdef' },
  );
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--worker-tls-cert, --worker-tls-key and --worker-tls-server-name need --worker-tls-ca/);

  // The ledger's batch window: a bounded whole number of ms, named in the error.
  result = run(balancerCli, ['--ledger-batch-window-ms=-1']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--ledger-batch-window-ms: got "-1", expected a number >= 0/);
  result = run(balancerCli, [], { HEADROOM_LEDGER_BATCH_WINDOW_MS: '5000' });
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /HEADROOM_LEDGER_BATCH_WINDOW_MS.*expected a number <= 1000/);

  result = run(balancerCli, ['--server-transport', 'quic']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--server-transport: got "quic", expected grpc-js or http2/);

  result = run(balancerCli, ['--frobnicate', '1']);
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /Unknown option '--frobnicate'/);

  result = run(balancerCli, ['--help']);
  assert.equal(result.status, 0);
  assert.match(result.stdout, /--candidate-percent/);
});
