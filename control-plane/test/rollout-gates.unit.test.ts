import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { LatencyHistogram, latencyBucketOf, latencyBucketValueMs, type LatencyByCluster, type WorkerReport } from '@headroom/fleet';
import { defaultGates } from '../src/index';
import { readGates, worstStatus } from '../src/rollouts/gates';
import { workerReport } from './worker-report';

function histogram(latenciesMs: number[], failed = 0): LatencyHistogram {
  const h = new LatencyHistogram();
  for (const ms of latenciesMs) h.add(latencyBucketOf(ms));
  h.failed = failed;
  return h;
}

const report = workerReport;

const inputs = (latency: LatencyByCluster, reports: WorkerReport[] = [report()]) => ({
  gates: defaultGates,
  integrations: ['bank-a', 'bank-b', 'bank-c'],
  windowSeconds: 30,
  minSamples: 10,
  clusters: { baseline: 'baseline', candidate: 'candidate' },
  latency,
  candidateReports: reports,
  nowUnixMs: 1000,
});

const same = Array.from({ length: 40 }, () => 100);

test('gates compare the candidate with the baseline per integration: ok, close, breached, and not enough data', () => {
  const latency: LatencyByCluster = new Map([
    [
      'baseline',
      new Map([
        ['bank-a', histogram(same)],
        ['bank-b', histogram(same)],
        ['bank-c', histogram(same)],
      ]),
    ],
    [
      'candidate',
      new Map([
        ['bank-a', histogram(same)],
        // Four times slower: p50 and p95 ratios about 4, far above 1.1 and 1.25.
        [
          'bank-b',
          histogram(
            same.map((ms) => ms * 4),
            2,
          ),
        ],
        // Too few tasks to judge.
        ['bank-c', histogram([100, 100, 100])],
      ]),
    ],
  ]);
  const reading = readGates(inputs(latency));
  const [a, b, c] = reading.integrations;
  assert.deepEqual(
    a!.gates.map((g) => [g.gate, g.status]),
    [
      ['p50Ratio', 'ok'],
      ['p95Ratio', 'ok'],
      ['errorRateIncrease', 'ok'],
    ],
  );
  assert.equal(a!.gates[0]!.value, 1);
  assert.equal(b!.status, 'breached');
  assert.ok(b!.gates[0]!.value! > 3.5 && b!.gates[0]!.value! < 4.5, String(b!.gates[0]!.value));
  // 2 failed of 42 on the candidate, none of 40 on the baseline: 0.0476 > 0.01, but chance could
  // do that (z 1.4 < 2.33): not enough data, with the figure.
  assert.deepEqual([b!.gates[2]!.value, b!.gates[2]!.status], [0.0476, 'not-enough-data']);
  assert.deepEqual(b!.samples, { baseline: 40, candidate: 42 });
  assert.equal(c!.status, 'not-enough-data');
  assert.ok(c!.gates.every((g) => g.value === null));
  assert.equal(reading.workers.status, 'ok');
});

test("the candidate's workers: the worst one counts; close above 90% of a line; no report is not enough data", () => {
  const latency: LatencyByCluster = new Map();
  const reading = readGates(inputs(latency, [report(), report({ heapUsedBytes: 700 }), report({ eventLoopDelayP99Ms: 250 })]));
  assert.deepEqual(
    reading.workers.gates.map((g) => [g.gate, g.value, g.status]),
    [
      ['gcShare', 0.01, 'ok'],
      ['eventLoopUtilization', 0.2, 'ok'],
      ['eventLoopDelayP99Ms', 250, 'breached'],
      ['heapShare', 0.7, 'ok'],
    ],
  );
  assert.equal(readGates(inputs(latency, [report({ heapUsedBytes: 780 })])).workers.status, 'close', '0.78 is above 90% of 0.85');
  assert.equal(readGates(inputs(latency, [])).workers.status, 'not-enough-data');
  assert.equal(worstStatus(['ok', 'not-enough-data', 'close']), 'close');
  assert.equal(worstStatus(['ok', 'breached', 'close']), 'breached');
  assert.equal(worstStatus([]), 'ok');
});

test('a ratio is close past 90% of the way from 1 to its line, not past 90% of the line', () => {
  const baseline = histogram(same);
  const p50RatioWith = (candidateMs: number) =>
    readGates(
      inputs(
        new Map([
          ['baseline', new Map([['bank-a', baseline]])],
          ['candidate', new Map([['bank-a', histogram(same.map(() => candidateMs))]])],
        ]),
      ),
    ).integrations[0]!.gates[0]!;
  assert.deepEqual([p50RatioWith(100).value, p50RatioWith(100).status], [1, 'ok'], 'no different: ok, though 1 is 91% of 1.1');
  // One latency bucket up is 2^(1/8) = 1.0905 times slower: past 1.09, 90% of the way to 1.1.
  const oneBucketUp = latencyBucketValueMs(latencyBucketOf(100) + 1);
  assert.deepEqual([p50RatioWith(oneBucketUp).value, p50RatioWith(oneBucketUp).status], [1.0905, 'close']);
  assert.equal(p50RatioWith(latencyBucketValueMs(latencyBucketOf(100) + 2)).status, 'breached');
});

test('an error-rate increase above its line breaks only when it is significant (two-proportion z-test, 99%)', () => {
  const failing = (n: number, failed: number) =>
    histogram(
      Array.from({ length: n - failed }, () => 100),
      failed,
    );
  const gate = (candidate: LatencyHistogram, baseline: LatencyHistogram) =>
    readGates(
      inputs(
        new Map([
          ['baseline', new Map([['bank-a', baseline]])],
          ['candidate', new Map([['bank-a', candidate]])],
        ]),
      ),
    ).integrations[0]!.gates[2]!;
  // 10 of 50 against 0 of 50: z 3.3.
  assert.deepEqual([gate(failing(50, 10), failing(50, 0)).value, gate(failing(50, 10), failing(50, 0)).status], [0.2, 'breached']);
  // 1 of 13 against 1 of 80 (a bank failing 2% of calls on both): 6.4 points, z 1.3.
  assert.equal(gate(failing(13, 1), failing(80, 1)).status, 'not-enough-data');
  // Below the line: ok, however many tasks.
  assert.equal(gate(failing(1000, 5), failing(1000, 0)).status, 'ok');
});
