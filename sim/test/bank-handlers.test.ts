import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gunzipSync } from 'node:zlib';
import { ConfigError } from '@headroom/common';
import { freePort } from '@headroom/common';
import { TaskFailedError } from '@headroom/worker';
import { createBankHandlers, readBankLeak, readBankUrl, type BankHandlers } from '../src/handlers/bank';
import { compressDebugRecord } from '../src/handlers/debug-payload';
import { upstreamErrorCodes } from '../src/handlers/upstream-call';
import type { BankProfile } from '../src/bank/banks';
import { bankTask, startTestSimulator, testAgent } from './bank-helpers';

/** Banks with fixed latencies and no errors, so each test controls what goes wrong. */
const steadyBanks: BankProfile[] = [
  { name: 'bank-a', medianLatencyMs: 5, latencySigma: 0, maxLatencyMs: 1000, errorRate: 0 },
  { name: 'bank-b', medianLatencyMs: 20, latencySigma: 0, maxLatencyMs: 1000, errorRate: 0 },
  { name: 'bank-e', medianLatencyMs: 1, latencySigma: 0, maxLatencyMs: 1000, errorRate: 1 },
];

interface BankResult {
  bank: string;
  accountId: string;
  pages: number;
  upstreamCalls: number;
  upstreamBytes: number;
  summary: { transactions: number; incomeMinor: number; spendingMinor: number; byCategory: Record<string, { count: number; totalMinor: number }> };
  debugRecordBytes: number;
  debugRecordGzipBytes: number;
  leaked?: boolean;
}

const run = async (set: BankHandlers, task: Parameters<BankHandlers['handlers']['*'] & object>[0], signal = new AbortController().signal) =>
  JSON.parse(String(await set.handlers['*']!(task, signal))) as BankResult;

const failsWith =
  (code: string, messagePart = '') =>
  (error: unknown) => {
    assert.ok(error instanceof TaskFailedError, `expected a TaskFailedError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    assert.ok(error.message.includes(messagePart), `"${error.message}" should say ${messagePart}`);
    return true;
  };

test('a task fetches the account and its pages, categorises and sums the transactions, and gzips a debugging record', async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const set = createBankHandlers({ bankUrl: simulator.url });
  const before = simulator.stats().requestsTotal;
  const result = await run(set, bankTask(agent, { key: 'acc-7' }));
  assert.equal(result.bank, 'bank-a');
  assert.equal(result.accountId, 'acc-7');
  assert.ok(result.pages >= 2 && result.pages <= 4, `${result.pages} pages`);
  assert.equal(result.upstreamCalls, result.pages + 1);
  assert.equal(simulator.stats().requestsTotal - before, result.upstreamCalls);
  assert.ok(result.upstreamBytes > 60_000, `${result.upstreamBytes} bytes fetched`);
  const categories = Object.values(result.summary.byCategory);
  assert.equal(
    categories.reduce((sum, c) => sum + c.count, 0),
    result.summary.transactions,
  );
  assert.equal(
    categories.reduce((sum, c) => sum + c.totalMinor, 0),
    result.summary.incomeMinor + result.summary.spendingMinor,
  );
  assert.ok(result.summary.spendingMinor < 0 && result.summary.incomeMinor > 0);
  assert.ok(
    result.debugRecordGzipBytes > 0 && result.debugRecordGzipBytes < result.debugRecordBytes / 3,
    `${result.debugRecordBytes} bytes gzipped to ${result.debugRecordGzipBytes}`,
  );
  assert.equal(result.leaked, undefined);

  const fewer = await run(set, bankTask(agent, { key: 'acc-7', payload: { maxPages: 1, accountId: 'acc-7', upstreamTimeoutMs: 5000 } }));
  assert.equal(fewer.upstreamCalls, 2);
});

test('the debugging record is bounded: transactions past the limit are counted, not quoted', async () => {
  const transactions = Array.from({ length: 2000 }, (_, i) => ({ id: `tx-${i}` }));
  const compressed = await compressDebugRecord({ taskId: 't', calls: [], account: {}, transactions, summary: {} });
  const record = JSON.parse(gunzipSync(compressed.gzip).toString('utf8')) as { transactions: unknown[]; transactionsLeftOut: number };
  assert.equal(record.transactions.length, 500);
  assert.equal(record.transactionsLeftOut, 1500);
});

test('an outage, errors, a slow bank and a dead upstream become coded failures', async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const set = createBankHandlers({ bankUrl: simulator.url });

  simulator.setIncident({ bank: 'bank-a', kind: 'outage', durationMs: 30_000 });
  await assert.rejects(run(set, bankTask(agent)), (error: unknown) => {
    failsWith(upstreamErrorCodes.unavailable, 'bank-a is in an outage')(error);
    assert.ok((error as TaskFailedError).retryAfterMs! >= 29_000, "the bank's Retry-After is passed on");
    return true;
  });
  simulator.clearIncidents();
  assert.equal((await run(set, bankTask(agent))).bank, 'bank-a', 'the bank is back once the outage is cleared');

  await assert.rejects(run(set, bankTask(agent, { integration: 'bank-e' })), failsWith(upstreamErrorCodes.unavailable, 'HR_ERR_BANK_'));

  simulator.setIncident({ bank: 'bank-b', kind: 'slow', factor: 50 });
  const startedAt = performance.now();
  await assert.rejects(
    run(set, bankTask(agent, { integration: 'bank-b', payload: { upstreamTimeoutMs: 50 } })),
    failsWith(upstreamErrorCodes.timeout, 'no answer within 50 ms'),
  );
  assert.ok(performance.now() - startedAt < 600, 'it gave up at the timeout, not when the slow answer came (1 s)');
  simulator.clearIncidents();

  await assert.rejects(run(set, bankTask(agent, { integration: 'bank-zz' })), failsWith(upstreamErrorCodes.rejected, '404'));

  const deadUrl = `http://127.0.0.1:${await freePort()}`;
  await assert.rejects(run(createBankHandlers({ bankUrl: deadUrl }), bankTask(agent)), failsWith(upstreamErrorCodes.unavailable, 'ECONNREFUSED'));
});

test('a slow bank makes tasks slower', async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const set = createBankHandlers({ bankUrl: simulator.url });
  const timed = async () => {
    const startedAt = performance.now();
    const result = await run(set, bankTask(agent, { integration: 'bank-b', key: 'acc-3' }));
    return { ms: performance.now() - startedAt, calls: result.upstreamCalls };
  };
  const normal = await timed();
  simulator.setIncident({ bank: 'bank-b', kind: 'slow', factor: 10 });
  const slow = await timed();
  // Account, then page 1, then the others at once: three waits in a row, of 20 ms, then of 200 ms.
  assert.ok(normal.ms >= 50, `normal task ${normal.ms.toFixed(0)} ms`);
  assert.ok(slow.ms >= 590 && slow.ms > normal.ms, `slow task ${slow.ms.toFixed(0)} ms, normal ${normal.ms.toFixed(0)} ms`);
});

test("a slow incident for one cluster slows that cluster's tasks alone (the handlers name their worker's cluster)", async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const set = createBankHandlers({ bankUrl: simulator.url });
  const timed = async (cluster: string) => {
    const startedAt = performance.now();
    await run(set, { ...bankTask(agent, { integration: 'bank-b', key: 'acc-3' }), cluster });
    return performance.now() - startedAt;
  };
  simulator.setIncident({ bank: 'bank-b', kind: 'slow', factor: 10, cluster: 'candidate' });
  const baselineMs = await timed('baseline');
  const candidateMs = await timed('candidate');
  // Three waits in a row: of 20 ms each on the baseline, of 200 ms on the candidate.
  assert.ok(baselineMs >= 50 && baselineMs < 400, `baseline task ${baselineMs.toFixed(0)} ms`);
  assert.ok(candidateMs >= 590, `candidate task ${candidateMs.toFixed(0)} ms`);
});

test('HEADROOM_BANK_LEAK=1 makes every task leak (a build with the bug); a bad value names it', async (t) => {
  assert.equal(readBankLeak({}), false);
  assert.equal(readBankLeak({ HEADROOM_BANK_LEAK: '0' }), false);
  assert.equal(readBankLeak({ HEADROOM_BANK_LEAK: '1' }), true);
  assert.equal(readBankLeak({ HEADROOM_BANK_LEAK: 'true' }), true);
  assert.throws(
    () => readBankLeak({ HEADROOM_BANK_LEAK: 'yes' }),
    (error: unknown) => error instanceof ConfigError && error.message.startsWith('HEADROOM_BANK_LEAK: got "yes"'),
  );
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const set = createBankHandlers({ bankUrl: simulator.url, leakCapBytes: 4 * 1024 * 1024, leakEveryTask: true });
  t.after(() => set.releaseLeaked());
  assert.equal((await run(set, bankTask(agent, { integration: 'bank-a', key: 'acc-1' }))).leaked, true);
  assert.equal(set.leakStats().retainedTasks, 1);
});

test('bad payloads fail the task with HR_ERR_INVALID_PAYLOAD naming the field, without calling the bank', async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 1);
  const set = createBankHandlers({ bankUrl: simulator.url });
  const cases: [unknown, string][] = [
    [{ maxPages: 0 }, 'maxPages:'],
    [{ maxPages: 'all' }, 'maxPages:'],
    [{ upstreamTimeoutMs: -1 }, 'upstreamTimeoutMs:'],
    [{ accountId: 'a/b' }, 'accountId:'],
    [{ leak: 'yes' }, 'leak:'],
    [{ colour: 'red' }, 'colour: unknown field'],
  ];
  for (const [payload, names] of cases) await assert.rejects(run(set, bankTask(agent, { payload })), failsWith('HR_ERR_INVALID_PAYLOAD', names));
  await assert.rejects(run(set, { ...bankTask(agent), payload: Buffer.from('{not json') }), failsWith('HR_ERR_INVALID_PAYLOAD', 'payload: not JSON'));
  await assert.rejects(run(set, bankTask(agent, { key: 'user:1' })), failsWith('HR_ERR_INVALID_PAYLOAD', 'accountId: got "user:1" (the task\'s key)'));
  assert.equal(simulator.stats().requestsTotal, 0);
  // The load generator's sleepMs (meant for the demo handlers) is accepted and ignored.
  assert.equal((await run(set, bankTask(agent, { payload: { sleepMs: 40 } }))).bank, 'bank-a');
});

test('HEADROOM_BANK_URL is validated, with a message naming it', () => {
  assert.equal(readBankUrl({}), 'http://127.0.0.1:8090');
  assert.equal(readBankUrl({ HEADROOM_BANK_URL: 'http://bank-sim:8090/' }), 'http://bank-sim:8090');
  assert.equal(readBankUrl({ HEADROOM_BANK_URL: 'https://example.com/upstream/' }), 'https://example.com/upstream');
  for (const bad of ['bank-sim:8090', 'ftp://x', 'http://x/?a=1', 'http://user:pw@x', 'not a url']) {
    assert.throws(
      () => readBankUrl({ HEADROOM_BANK_URL: bad }),
      (error: unknown) => error instanceof ConfigError && error.message.startsWith(`HEADROOM_BANK_URL: got ${JSON.stringify(bad)}`),
    );
  }
});

test("the handler honours abort: it stops at once with the signal's reason and the upstream sees the request go", async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const set = createBankHandlers({ bankUrl: simulator.url });
  simulator.setIncident({ bank: 'bank-b', kind: 'slow', factor: 500 });
  const controller = new AbortController();
  const running = run(set, bankTask(agent, { integration: 'bank-b' }), controller.signal);
  while (simulator.stats().requestsInFlight === 0) await new Promise((resolve) => setTimeout(resolve, 5));
  const reason = new Error('deadline');
  const startedAt = performance.now();
  controller.abort(reason);
  await assert.rejects(running, (error: unknown) => error === reason);
  assert.ok(performance.now() - startedAt < 500, 'it stopped long before the 10 s answer');
  for (let waited = 0; simulator.stats().requestsInFlight > 0; waited += 10) {
    assert.ok(waited < 2000, 'the upstream request was not cancelled');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  const already = new AbortController();
  already.abort(reason);
  await assert.rejects(run(set, bankTask(agent), already.signal), (error: unknown) => error === reason);
});

test("the shared agent's connection cap holds: never more than N connections to the bank, the rest wait", async (t) => {
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const connectionCap = 4;
  const agent = testAgent(t, connectionCap);
  const set = createBankHandlers({ bankUrl: simulator.url });
  let mostPending = 0;
  const sampler = setInterval(() => {
    for (const stats of Object.values(agent.stats)) mostPending = Math.max(mostPending, Number(stats.pending));
  }, 2);
  t.after(() => clearInterval(sampler));
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => run(set, bankTask(agent, { integration: 'bank-b', key: `acc-${i}` }))));
  clearInterval(sampler);
  assert.equal(results.length, 16);
  assert.equal(simulator.stats().maxOpenConnections, connectionCap, `at most ${connectionCap} connections, all of them used`);
  assert.ok(mostPending > 0, 'requests waited for a connection (the metric the worker exports as pending)');
});

test('the leaky variant keeps its data alive, and stops at its cap', async (t) => {
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const simulator = await startTestSimulator(t, { banks: steadyBanks });
  const agent = testAgent(t, 4);
  const capBytes = 8 * 1024 * 1024;
  const set = createBankHandlers({ bankUrl: simulator.url, leakCapBytes: capBytes });
  t.after(() => set.releaseLeaked());

  const heapUsed = () => {
    gc();
    return process.memoryUsage().heapUsed;
  };
  const clean = await run(set, bankTask(agent, { key: 'acc-1' }));
  assert.equal(clean.leaked, undefined);
  assert.equal(set.leakStats().retainedTasks, 0);

  const baseline = heapUsed();
  for (let i = 0; i < 10; i++) assert.equal((await run(set, bankTask(agent, { integration: 'bank-a-leaky', key: `acc-${i}` }))).leaked, true);
  const leaked = set.leakStats();
  assert.equal(leaked.retainedTasks, 10);
  const grownBytes = heapUsed() - baseline;
  assert.ok(
    grownBytes > leaked.retainedBytes / 3 && grownBytes <= leaked.retainedBytes * 1.2,
    `heap grew ${grownBytes} bytes for an estimated ${leaked.retainedBytes}`,
  );

  // The payload flag leaks too; past the cap nothing more is kept.
  const results = [];
  for (let i = 0; i < 30; i++) results.push(await run(set, bankTask(agent, { key: `acc-${i}`, payload: { leak: true } })));
  const capped = set.leakStats();
  assert.ok(capped.retainedBytes <= capBytes, `${capped.retainedBytes} bytes held, cap ${capBytes}`);
  assert.ok(capped.skippedTasks > 0 && results.some((r) => r.leaked === false), 'tasks past the cap do not leak');
  assert.equal(capped.retainedTasks + capped.skippedTasks, 40);
  assert.ok(heapUsed() - baseline < capBytes * 1.2, 'the heap stays within the cap');

  set.releaseLeaked();
  assert.ok(heapUsed() - baseline < 2 * 1024 * 1024, 'released, the snapshots are collected');
});
