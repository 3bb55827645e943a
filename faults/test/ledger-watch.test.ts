/**
 * The measures the incident case relies on, checked on their own (seconds, not a fleet): the
 * ledger reader against a real ledger in Redis, and the service windows on a hand-made task log.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { Ledger, clusterKeys } from '@headroom/fleet';
import { connected, deleteKeysUnder, uniquePrefix } from '@headroom/testkit';
import type { SubmitAnswer } from '@headroom/sim';
import {
  LedgerReader,
  TaskLog,
  countedPastBound,
  healthyFromMs,
  serviceBetween,
  serviceWindows,
  sleep,
  type LedgerSample,
  type Submission,
} from '../src/index';

const cluster = 'baseline';
const worker = { workerId: 'w0', address: '127.0.0.1:1', capacity: 4, draining: false, dispatchGraceMs: 60_000 };

test('the ledger reader: a counted slot past the bound shows, whether a lease kept too long, one written back long ago, or a count with no lease', async (t) => {
  const redis = await connected();
  const keyPrefix = uniquePrefix('ledger-watch');
  t.after(async () => {
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  const ledger = new Ledger(redis, { keyPrefix });
  await ledger.heartbeat(cluster, { ...worker, heldLeaseIds: [] });
  for (let i = 0; i < 2; i++) assert.ok((await ledger.reserve(cluster, { priority: 'user', balancerId: 'b0', waitIfNone: false })).ok);
  const reader = (leaseBoundMs: number) => new LedgerReader(redis, { keyPrefix, inTransitMs: 60_000, leaseBoundMs });
  /** w0 as a sample of an idle worker: what is counted past the bound. */
  const pastBound = async (from: LedgerReader): Promise<number> => {
    const count = (await from.read(cluster, ['w0'])).get('w0');
    assert.ok(count, 'w0 is in the ledger');
    const sample: LedgerSample = { atMs: 0, workerId: 'w0', runningTasks: 0, scrapeMs: 0, ...count };
    return countedPastBound(sample);
  };

  const fresh = await reader(60_000).read(cluster, ['w0', 'not-registered']);
  assert.deepEqual([...fresh], [['w0', { countedInFlight: 2, reservedRecently: 2, leasesWithinBound: 2 }]]);
  await sleep(30);
  assert.equal(await pastBound(reader(10)), 2, 'both leases are older than a bound of 10 ms');

  // A lease the worker holds and the ledger lost is written back dated 0: its age counts from when the reader first saw it.
  await ledger.heartbeat(cluster, { ...worker, heldLeaseIds: ['w0|held-elsewhere'] });
  const watching = reader(60_000);
  assert.equal((await watching.read(cluster, ['w0'])).get('w0')?.leasesWithinBound, 3, 'written back: within the bound when first seen');
  const sooner = reader(10);
  await sooner.read(cluster, ['w0']);
  await sleep(30);
  assert.equal(await pastBound(sooner), 3, 'written back 30 ms before, bound 10 ms');

  // A count with no lease behind it (as the ledger before layout 3 left after clearing a worker's records).
  await redis.hdel(`${clusterKeys(keyPrefix, cluster).leasesPrefix}w0`, 'held-elsewhere');
  assert.equal(await pastBound(watching), 1, 'three counted, two leases');
});

function submission(seq: number, submittedAtMs: number, latencyMs: number | undefined, ok = true): Submission {
  const answer = (
    ok
      ? { ok: true, response: { taskId: `t${seq}` }, placement: undefined }
      : { ok: false, status: 4, code: 'HR_ERR_DEADLINE_EXCEEDED', coded: true, details: '', retryAfterMs: undefined }
  ) as SubmitAnswer;
  return {
    seq,
    task: { id: `t${seq}` },
    balancerId: 'b0',
    submittedAtMs,
    answeredAtMs: latencyMs === undefined ? undefined : submittedAtMs + latencyMs,
    answer: latencyMs === undefined ? undefined : answer,
    answers: latencyMs === undefined ? 0 : 1,
  };
}

test('service windows: ok share and p99 by time of submission, and the start of the healthy run that lasts to the end', () => {
  const log = new TaskLog();
  // Ten tasks a second for 4 s: the first second slow and half failed, then fast; one never answered in the third second.
  for (let i = 0; i < 40; i++) {
    const atMs = i * 100;
    const firstSecond = atMs < 1000;
    log.submissions.push(submission(i, atMs, i === 25 ? undefined : firstSecond ? 900 : 100, !firstSecond || i % 2 === 0));
  }
  assert.deepEqual(serviceBetween(log, 0, 1000), { arrivals: 10, okShare: 0.5, p99LatencyMs: 900 });
  assert.deepEqual(
    serviceBetween(log, 1000, 2000, (s) => s.seq % 2 === 0),
    { arrivals: 5, okShare: 1, p99LatencyMs: 100 },
  );
  assert.equal(serviceBetween(log, 2000, 3000).p99LatencyMs, Number.POSITIVE_INFINITY, 'a task never answered is the slowest');
  const windows = serviceWindows(log, 0, 4000, 1000, 500);
  assert.deepEqual(
    windows.map((w) => w.fromMs),
    [0, 500, 1000, 1500, 2000, 2500, 3000],
  );
  const healthy = (w: { okShare: number; p99LatencyMs: number }) => w.okShare >= 0.9 && w.p99LatencyMs <= 200;
  assert.equal(healthyFromMs(windows, healthy), 3000, 'the windows holding the unanswered task are not healthy');
  assert.equal(healthyFromMs(windows.slice(0, -1), healthy), undefined, 'the last window unhealthy: not recovered');
});
