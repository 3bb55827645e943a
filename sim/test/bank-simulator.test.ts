import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { once } from 'node:events';
import { ConfigError } from '@headroom/common';
import { spawnReady } from '@headroom/testkit';
import { bankAccountSchema, transactionsPageSchema } from '../src/bank/api';
import { defaultBanks } from '../src/bank/banks';
import { startBankSimulator } from '../src/bank/bank-server';
import { callSimulator, quantile, runBounded, startTestSimulator, testAgent, type SimulatorAnswer } from './bank-helpers';

const bankCli = path.join(__dirname, '..', 'src', 'bank', 'cli.js');
const latencyOf = (answer: SimulatorAnswer) => Number(answer.headers['x-bank-latency-ms']);
const errorMessage = (answer: SimulatorAnswer) => (answer.body as { error: { message: string } }).error.message;

test("latencies follow each bank's log-normal profile, scaled by timeScale", async (t) => {
  const timeScale = 0.2;
  const simulator = await startTestSimulator(t, { timeScale });
  const agent = testAgent(t, 50);
  for (const bank of defaultBanks.filter((b) => b.name === 'bank-a' || b.name === 'bank-b')) {
    const answers = await runBounded(300, 50, (i) => callSimulator(agent, `${simulator.url}/banks/${bank.name}/accounts/acc-${i}`));
    const drawn = answers.map(latencyOf);
    const medianMs = bank.medianLatencyMs * timeScale;
    assert.ok(Math.abs(quantile(drawn, 0.5) / medianMs - 1) < 0.15, `${bank.name}: drawn median ${quantile(drawn, 0.5)} ms, configured ${medianMs} ms`);
    // The tail: p90 / p50 of a log-normal is e^(1.2816 sigma).
    const tailRatio = quantile(drawn, 0.9) / quantile(drawn, 0.5);
    const expectedRatio = Math.exp(1.2816 * bank.latencySigma);
    assert.ok(Math.abs(tailRatio / expectedRatio - 1) < 0.25, `${bank.name}: p90/p50 ${tailRatio.toFixed(2)}, expected about ${expectedRatio.toFixed(2)}`);
  }
  // Unloaded (300 answers at once above keep this process's CPU busy), a client waits the drawn
  // latency (a timer, which may fire a little early by the event loop's cached clock) and little more.
  const calm = await runBounded(40, 2, (i) => callSimulator(agent, `${simulator.url}/banks/bank-a/accounts/acc-${i}`));
  for (const answer of calm) assert.ok(answer.durationMs >= latencyOf(answer) - 3, `waited ${answer.durationMs.toFixed(1)} ms for ${latencyOf(answer)} ms`);
  const overheadMs = quantile(
    calm.map((answer) => answer.durationMs - latencyOf(answer)),
    0.5,
  );
  assert.ok(overheadMs >= -1 && overheadMs < 5, `median wait beyond the drawn latency: ${overheadMs.toFixed(1)} ms`);
});

test('a seed replays the same latencies, errors and documents', async (t) => {
  const banks = [{ name: 'bank-x', medianLatencyMs: 5, latencySigma: 1, maxLatencyMs: 50, errorRate: 0.3 }];
  const [one, two, other] = await Promise.all([
    startTestSimulator(t, { banks, seed: 7 }),
    startTestSimulator(t, { banks, seed: 7 }),
    startTestSimulator(t, { banks, seed: 8 }),
  ]);
  const agent = testAgent(t, 4);
  const run = async (url: string) => {
    const answers: SimulatorAnswer[] = [];
    for (let i = 0; i < 20; i++) answers.push(await callSimulator(agent, `${url}/banks/bank-x/accounts/acc-${i % 3}/transactions?page=2`));
    return answers.map((answer) => ({ status: answer.status, latency: latencyOf(answer), body: answer.body }));
  };
  const [first, second, third] = [await run(one.url), await run(two.url), await run(other.url)];
  assert.deepEqual(first, second);
  assert.notDeepEqual(
    first.map((a) => a.latency),
    third.map((a) => a.latency),
  );
  assert.ok(first.some((a) => a.status === 200) && first.some((a) => a.status >= 500), 'an error rate of 0.3 fails some of 20 requests, not all');
});

test('accounts and transaction pages are JSON documents of realistic size', async (t) => {
  const simulator = await startTestSimulator(t, { timeScale: 0.01 });
  const agent = testAgent(t, 4);
  const account = await callSimulator(agent, `${simulator.url}/banks/bank-c/accounts/acc-17`);
  assert.equal(account.status, 200);
  const parsedAccount = bankAccountSchema.parse(account.body);
  const accountBytes = JSON.stringify(account.body).length;
  assert.ok(accountBytes > 2_000 && accountBytes < 10_000, `account of ${accountBytes} bytes`);
  assert.ok(parsedAccount.transactionPages >= 2 && parsedAccount.transactionPages <= 4);
  for (let page = 1; page <= parsedAccount.transactionPages; page++) {
    const answer = await callSimulator(agent, `${simulator.url}/banks/bank-c/accounts/acc-17/transactions?page=${page}`);
    const parsed = transactionsPageSchema.parse(answer.body);
    const bytes = JSON.stringify(answer.body).length;
    assert.ok(bytes > 20_000 && bytes < 80_000, `page ${page}: ${bytes} bytes`);
    assert.equal(parsed.nextPage, page < parsedAccount.transactionPages ? page + 1 : null);
    assert.ok(parsed.transactions.every((tx) => tx.currency === parsedAccount.currency));
  }
  const past = await callSimulator(agent, `${simulator.url}/banks/bank-c/accounts/acc-17/transactions?page=${parsedAccount.transactionPages + 1}`);
  assert.deepEqual(transactionsPageSchema.parse(past.body).transactions, []);
});

test('bad input gets 400 (404, 405, 413) naming what is wrong, and changes nothing', async (t) => {
  const simulator = await startTestSimulator(t, { timeScale: 0.01 });
  const agent = testAgent(t, 2);
  const cases: { path: string; method?: 'GET' | 'POST' | 'DELETE' | 'PUT'; body?: string; status: number; names: string }[] = [
    { path: '/banks/bank-z/accounts/acc-1', status: 404, names: 'bank: no bank "bank-z"' },
    { path: '/banks/bank-a/accounts/a%20b', status: 400, names: 'id: got "a b"' },
    { path: '/banks/bank-a/accounts/acc-1/transactions?page=0', status: 400, names: 'page: got "0"' },
    { path: '/banks/bank-a/accounts/acc-1/transactions?page=two', status: 400, names: 'page: got "two"' },
    { path: '/banks/bank-a/accounts/acc-1/transactions?page=1&size=5', status: 400, names: 'size: unknown query parameter' },
    { path: '/banks/bank-a/accounts/acc-1?page=1', status: 400, names: 'page: unknown query parameter' },
    { path: '/banks/bank-a/loans/1', status: 404, names: 'path:' },
    { path: '/nowhere', status: 404, names: 'path: no /nowhere' },
    { path: '/banks/bank-a/accounts/acc-1', method: 'POST', body: '{}', status: 405, names: 'method: POST' },
    { path: '/incidents', method: 'PUT', body: '{}', status: 405, names: 'method: PUT' },
    {
      path: '/incidents',
      method: 'POST',
      body: '{"bank":"bank-z","kind":"slow"}',
      status: 400,
      names: 'bank: got "bank-z", expected one of bank-a, bank-b, bank-c, bank-d',
    },
    {
      path: '/incidents',
      method: 'POST',
      body: '{"bank":"bank-a","kind":"meteor"}',
      status: 400,
      names: 'kind: got "meteor", expected one of latency-spike, slow, outage',
    },
    { path: '/incidents', method: 'POST', body: '{"bank":"bank-a","kind":"slow","factor":0.5}', status: 400, names: 'factor: got 0.5' },
    { path: '/incidents', method: 'POST', body: '{"bank":"bank-a","kind":"slow","factor":"2"}', status: 400, names: 'factor: got "2"' },
    {
      path: '/incidents',
      method: 'POST',
      body: '{"bank":"bank-a","kind":"outage","factor":2}',
      status: 400,
      names: 'factor: got 2, an outage takes no factor',
    },
    { path: '/incidents', method: 'POST', body: '{"bank":"bank-a","kind":"slow","durationMs":-5}', status: 400, names: 'durationMs: got -5' },
    { path: '/incidents', method: 'POST', body: '{"bank":"bank-a","kind":"slow","colour":"red"}', status: 400, names: '"colour"' },
    { path: '/incidents', method: 'POST', body: '{"kind":"slow"}', status: 400, names: 'bank:' },
    {
      path: '/incidents',
      method: 'POST',
      body: '{"bank":"bank-a","kind":"slow","cluster":"no spaces"}',
      status: 400,
      names: 'cluster: got "no spaces", expected a cluster name',
    },
    { path: '/incidents', method: 'POST', body: '{"bank":"bank-a","kind":"slow","cluster":7}', status: 400, names: 'cluster: got 7' },
    { path: '/incidents', method: 'POST', body: 'not json', status: 400, names: 'body: not JSON' },
    { path: '/incidents', method: 'POST', body: '', status: 400, names: 'body: missing' },
    { path: '/incidents', method: 'POST', body: `{"bank":"${'x'.repeat(20_000)}"}`, status: 413, names: 'body: larger than 16384 bytes' },
    { path: '/incidents?kind=meteor', method: 'DELETE', status: 400, names: 'kind: got "meteor"' },
    { path: '/incidents?bank=bank-z', method: 'DELETE', status: 400, names: 'bank: got "bank-z"' },
  ];
  for (const { path: requestPath, method, body, status, names } of cases) {
    const answer = await callSimulator(agent, simulator.url + requestPath, { ...(method ? { method } : {}), ...(body === undefined ? {} : { body }) });
    assert.equal(answer.status, status, `${method ?? 'GET'} ${requestPath}: ${JSON.stringify(answer.body)}`);
    assert.ok(errorMessage(answer).includes(names), `${method ?? 'GET'} ${requestPath}: "${errorMessage(answer)}" should name ${names}`);
  }
  assert.deepEqual(simulator.incidents(), []);
  assert.throws(
    () => simulator.setIncident({ bank: 'bank-a', kind: 'slow', factor: 0 }),
    (error: unknown) => error instanceof ConfigError && error.message.includes('factor: got 0'),
  );
  await assert.rejects(
    startBankSimulator({ port: 0, timeScale: -1 }),
    (error: unknown) => error instanceof ConfigError && error.message.includes('timeScale: got -1'),
  );
  await assert.rejects(startBankSimulator({ port: 0, banks: [] }), (error: unknown) => error instanceof ConfigError && error.message.includes('banks'));
});

test('incidents switch on and off: slow and spikes multiply latency, an outage answers 503, and they expire', async (t) => {
  const banks = [
    { name: 'bank-a', medianLatencyMs: 10, latencySigma: 0, maxLatencyMs: 1000, errorRate: 0 },
    { name: 'bank-b', medianLatencyMs: 10, latencySigma: 0, maxLatencyMs: 1000, errorRate: 0 },
  ];
  const simulator = await startTestSimulator(t, { banks });
  const agent = testAgent(t, 4);
  const account = (bank: string) => callSimulator(agent, `${simulator.url}/banks/${bank}/accounts/acc-1`);
  const post = (body: unknown) => callSimulator(agent, `${simulator.url}/incidents`, { method: 'POST', body: JSON.stringify(body) });

  assert.equal(latencyOf(await account('bank-a')), 10);
  const slow = await post({ bank: 'bank-a', kind: 'slow', factor: 5 });
  assert.equal(slow.status, 201);
  assert.deepEqual((slow.body as { incident: object }).incident, {
    bank: 'bank-a',
    kind: 'slow',
    factor: 5,
    startedAtUnixMs: (slow.body as { incident: { startedAtUnixMs: number } }).incident.startedAtUnixMs,
    endsAtUnixMs: null,
    cluster: null,
  });
  const slowed = await account('bank-a');
  assert.equal(latencyOf(slowed), 50);
  assert.ok(slowed.durationMs >= 49, `a slow bank answered in ${slowed.durationMs} ms`);
  assert.equal(latencyOf(await account('bank-b')), 10, 'other banks are untouched');

  assert.equal((await post({ bank: 'bank-a', kind: 'latency-spike', factor: 2, durationMs: 300 })).status, 201);
  assert.equal(latencyOf(await account('bank-a')), 100, 'a spike and a slow bank multiply');
  assert.equal((await post({ bank: 'bank-a', kind: 'slow', factor: 3 })).status, 201);
  const listed = (await callSimulator(agent, `${simulator.url}/incidents`)).body as { incidents: { kind: string; factor: number }[] };
  assert.deepEqual(
    listed.incidents.map((i) => [i.kind, i.factor]).sort(),
    [
      ['latency-spike', 2],
      ['slow', 3],
    ],
    'setting a kind again replaces it',
  );

  await new Promise((resolve) => setTimeout(resolve, 320));
  assert.equal(latencyOf(await account('bank-a')), 30, 'the spike ended by itself');

  assert.equal((await post({ bank: 'bank-b', kind: 'outage', durationMs: 60_000 })).status, 201);
  const down = await account('bank-b');
  assert.equal(down.status, 503);
  assert.equal((down.body as { error: { code: string } }).error.code, 'HR_ERR_BANK_UNAVAILABLE');
  assert.ok(Number(down.headers['retry-after']) >= 59, `retry-after ${String(down.headers['retry-after'])}`);
  assert.equal(down.headers['x-bank-latency-ms'], undefined, 'an outage answers at once, drawing no latency');

  const clearedOne = await callSimulator(agent, `${simulator.url}/incidents?bank=bank-b&kind=outage`, { method: 'DELETE' });
  assert.deepEqual(clearedOne.body, { cleared: 1 });
  assert.equal((await account('bank-b')).status, 200);
  const clearedAll = await callSimulator(agent, `${simulator.url}/incidents`, { method: 'DELETE' });
  assert.deepEqual(clearedAll.body, { cleared: 1 });
  assert.equal(latencyOf(await account('bank-a')), 10);
  assert.deepEqual(simulator.incidents(), []);
});

test('an incident that names a cluster touches only the calls that say they come from it', async (t) => {
  const banks = [{ name: 'bank-a', medianLatencyMs: 10, latencySigma: 0, maxLatencyMs: 1000, errorRate: 0 }];
  const simulator = await startTestSimulator(t, { banks });
  const agent = testAgent(t, 4);
  const account = (cluster?: string) =>
    callSimulator(agent, `${simulator.url}/banks/bank-a/accounts/acc-1`, cluster === undefined ? {} : { headers: { 'x-headroom-cluster': cluster } });
  const post = (body: unknown) => callSimulator(agent, `${simulator.url}/incidents`, { method: 'POST', body: JSON.stringify(body) });

  const slow = await post({ bank: 'bank-a', kind: 'slow', factor: 4, cluster: 'candidate' });
  assert.equal(slow.status, 201, JSON.stringify(slow.body));
  assert.equal((slow.body as { incident: { cluster: string } }).incident.cluster, 'candidate');
  assert.equal(latencyOf(await account('candidate')), 40, "the candidate's calls are slow");
  assert.equal(latencyOf(await account('baseline')), 10, "the baseline's are not");
  assert.equal(latencyOf(await account()), 10, 'nor are calls that name no cluster');

  // One incident of a kind per bank: a slow bank for everyone replaces the candidate's.
  assert.equal((await post({ bank: 'bank-a', kind: 'slow', factor: 2 })).status, 201);
  assert.deepEqual(
    simulator.incidents().map((i) => [i.kind, i.cluster]),
    [['slow', null]],
  );
  assert.equal(latencyOf(await account('baseline')), 20);
  assert.equal(latencyOf(await account()), 20);

  // An outage of one cluster's calls, through the handle; the other kinds multiply as before.
  simulator.setIncident({ bank: 'bank-a', kind: 'outage', cluster: 'candidate' });
  assert.equal((await account('candidate')).status, 503);
  assert.equal((await account('baseline')).status, 200);
  assert.equal(simulator.clearIncidents({ kind: 'outage' }), 1);
  assert.equal((await account('candidate')).status, 200);
});

test('close drops answers still waiting, does not hang, and is idempotent', async (t) => {
  const simulator = await startBankSimulator({
    port: 0,
    seed: 1,
    banks: [{ name: 'bank-a', medianLatencyMs: 60_000, latencySigma: 0, maxLatencyMs: 60_000, errorRate: 0 }],
  });
  const agent = testAgent(t, 2);
  const waiting = callSimulator(agent, `${simulator.url}/banks/bank-a/accounts/acc-1`);
  while (simulator.stats().requestsInFlight === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const startedAt = performance.now();
  assert.equal(simulator.close(), simulator.close());
  await simulator.close();
  assert.ok(performance.now() - startedAt < 1000);
  await assert.rejects(waiting);
});

test('headroom-bank-sim: --help, a bad setting exits 2 naming it, ready line, SIGTERM stops it', async (t) => {
  const run = (args: string[], env: NodeJS.ProcessEnv = {}) =>
    spawn(process.execPath, [bankCli, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const finish = async (child: ReturnType<typeof run>) => {
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const [code] = (await once(child, 'close')) as [number | null];
    return { code, stdout, stderr };
  };
  const help = await finish(run(['--help']));
  assert.equal(help.code, 0);
  for (const text of [
    '--host HOST',
    'HEADROOM_BANK_HOST',
    '--port PORT',
    'HEADROOM_BANK_PORT',
    '--seed N',
    'HEADROOM_BANK_SEED',
    '--time-scale X',
    'HEADROOM_BANK_TIME_SCALE',
  ])
    assert.ok(help.stdout.includes(text), `--help lists ${text}`);

  const badPort = await finish(run(['--port', 'eighty']));
  assert.equal(badPort.code, 2);
  assert.match(badPort.stderr, /--port: got "eighty"/);
  const badSeed = await finish(run([], { HEADROOM_BANK_SEED: '-3' }));
  assert.equal(badSeed.code, 2);
  assert.match(badSeed.stderr, /HEADROOM_BANK_SEED \(env\): got "-3"/);

  const simulator = await spawnReady(t, bankCli, ['--port', '0'], 15_000, { HEADROOM_BANK_SEED: '5' });
  assert.equal(simulator.ready.seed, 5);
  assert.deepEqual(simulator.ready.banks, ['bank-a', 'bank-b', 'bank-c', 'bank-d']);
  const health = await fetch(`${simulator.ready.address}/healthz`);
  assert.equal(health.status, 200);
  await health.text();
  await simulator.kill('SIGTERM');
  assert.equal(simulator.child.exitCode, 0);
});
