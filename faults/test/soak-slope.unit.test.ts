import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { judgeBySnapshots, judgeSeries, slopePerHour, type SoakSeries } from '../src/index';

test("the soak's slope per hour: least squares over time, 0 for a flat or too short series", () => {
  const minute = 60_000;
  const mib = 2 ** 20;
  assert.equal(slopePerHour([]), 0);
  assert.equal(slopePerHour([{ atMs: 0, value: 5 }]), 0);
  assert.equal(slopePerHour([0, 1, 2, 3].map((i) => ({ atMs: i * minute, value: 30 * mib }))), 0);
  // 1 MiB more every minute: 60 MiB an hour.
  assert.equal(slopePerHour([0, 1, 2, 3, 4].map((i) => ({ atMs: i * minute, value: (30 + i) * mib }))), 60 * mib);
  // A sawtooth around a flat level does not count as growth; the same around a rising one does.
  const sawtooth = (rise: number) => Array.from({ length: 20 }, (_, i) => ({ atMs: i * minute, value: 100 + (i % 2 === 0 ? 10 : -10) + rise * i }));
  assert.ok(Math.abs(slopePerHour(sawtooth(0))) < 100, String(slopePerHour(sawtooth(0))));
  assert.ok(Math.abs(slopePerHour(sawtooth(1)) - 60) < 10, String(slopePerHour(sawtooth(1))));
  // Samples at uneven times (one missed while a process restarted) still give the rate.
  assert.equal(slopePerHour([0, 1, 3, 4].map((i) => ({ atMs: i * minute, value: 2 * i }))), 120);
});

test("the soak's judgement of the heap: the program's objects after GC, or the heap used when full collections were too few to fit", () => {
  const minute = 60_000;
  const mib = 2 ** 20;
  const sampleEveryMs = 15_000;
  // 30 minutes of samples every 15 s, from a value at each time.
  const series = (unit: string, valueAt: (atMs: number) => number) => ({
    unit,
    points: Array.from({ length: 121 }, (_, i) => ({ atMs: i * sampleEveryMs, value: Math.round(valueAt(i * sampleEveryMs)) })),
  });
  // A full collection every 2 minutes: the gauge holds its figure until the next.
  const everyTwoMinutes = (perHourMiB: number) => (atMs: number) =>
    20 * mib +
    perHourMiB * mib * ((Math.floor(atMs / (2 * minute)) * 2 * minute) / (60 * minute)) +
    (Math.floor(atMs / (2 * minute)) % 3) * 1000 +
    Math.floor(atMs / (2 * minute));
  const judge = (samples: [string, ReturnType<typeof series>][]) =>
    new Map(judgeSeries(new Map(samples), { loadStartedAtMs: 0, redisRestartedAtMs: 0, sampleEveryMs, judged: true }).map((s) => [s.name, s]));

  // Objects flat, V8's code rising 3 MiB/h: not a leak.
  let judged = judge([
    ['worker:w0/heap-objects-after-gc', series('bytes', everyTwoMinutes(0))],
    ['worker:w0/heap-code-after-gc', series('bytes', everyTwoMinutes(3))],
    ['worker:w0/heap', series('bytes', (t) => 30 * mib + (t % minute) * 100)],
  ]);
  assert.equal(judged.get('worker:w0/heap-objects-after-gc')!.grows, false);
  assert.equal(judged.get('worker:w0/heap-objects-after-gc')!.note, undefined, 'fitted on its own: 12 full collections');
  assert.equal(judged.get('worker:w0/heap')!.note, undefined);
  assert.equal(judged.get('worker:w0/heap-code-after-gc')!.grows, false);
  // Objects rising 2 MiB/h: a leak.
  judged = judge([['balancer:b0/heap-objects-after-gc', series('bytes', everyTwoMinutes(2))]]);
  const leak = judged.get('balancer:b0/heap-objects-after-gc')!;
  assert.equal(leak.grows, true, `slope ${leak.slopePerHour / mib} MiB/h`);
  // Two full collections after the warm-up (a step): not fitted; the heap used is judged instead.
  const step = (atMs: number) => (atMs < 20 * minute ? 24 * mib : 24.6 * mib + 1000 * Math.floor(atMs / (20 * minute)));
  judged = judge([
    ['control-plane:c/heap-objects-after-gc', series('bytes', step)],
    ['control-plane:c/heap', series('bytes', (t) => 32 * mib - (t / (60 * minute)) * mib + (t % minute) * 100)],
  ]);
  assert.equal(judged.get('control-plane:c/heap-objects-after-gc')!.grows, false);
  assert.match(judged.get('control-plane:c/heap-objects-after-gc')!.note ?? '', /^2 full collections after the warm-up/);
  assert.equal(judged.get('control-plane:c/heap')!.grows, false);
  assert.match(judged.get('control-plane:c/heap')!.note ?? '', /judged for its heap after GC/);
  // ... and a heap used whose lows rise 2 MiB/h then fails it.
  judged = judge([
    ['control-plane:c/heap-objects-after-gc', series('bytes', step)],
    ['control-plane:c/heap', series('bytes', (t) => 32 * mib + (t / (60 * minute)) * 2 * mib + (t % minute) * 100)],
  ]);
  assert.equal(judged.get('control-plane:c/heap')!.grows, true);
  // A process with no full collection read at all: its heap used is judged.
  judged = judge([['control-plane:c/heap', series('bytes', (t) => 32 * mib + (t / (60 * minute)) * 2 * mib)]]);
  assert.equal(judged.get('control-plane:c/heap')!.grows, true);
  // A worker started again at minute 12: 18 minutes of it, 13 after its warm-up, too few windows
  // to fit (not judged, and not sent to the fallback), whatever its heap used does.
  const late = (s: ReturnType<typeof series>) => ({ unit: s.unit, points: s.points.filter((p) => p.atMs >= 12 * minute) });
  judged = judge([
    ['worker:w1/heap-objects-after-gc', late(series('bytes', everyTwoMinutes(5)))],
    ['worker:w1/heap', late(series('bytes', (t) => 30 * mib + (t / (60 * minute)) * 10 * mib))],
  ]);
  assert.equal(judged.get('worker:w1/heap-objects-after-gc')!.grows, false);
  assert.match(judged.get('worker:w1/heap-objects-after-gc')!.note ?? '', /^not judged: 2 points fitted/);
  assert.equal(judged.get('worker:w1/heap')!.grows, false);
  // A run under 10 minutes is not judged at all.
  const short = judgeSeries(new Map([['balancer:b0/heap-objects-after-gc', series('bytes', everyTwoMinutes(20))]]), {
    loadStartedAtMs: 0,
    redisRestartedAtMs: 0,
    sampleEveryMs,
    judged: false,
  });
  assert.equal(short[0]!.grows, false);
});

test("a process with two heap snapshots is judged by its program's data in them, its fitted series noted", () => {
  const mib = 2 ** 20;
  const fitted = (name: string, grows: boolean): SoakSeries => ({
    name,
    unit: 'bytes',
    sampled: 120,
    points: 5,
    mean: 20 * mib,
    slopePerHour: grows ? 1.5 * mib : 0,
    grows,
    values: [],
  });
  const pair = (process: string, programSlopeMiB: number) => ({
    process,
    atSeconds: [300, 1800] as [number, number],
    programBytes: [10 * mib, 10 * mib + (programSlopeMiB * mib * 1500) / 3600] as [number, number],
    v8Bytes: [20 * mib, 21 * mib] as [number, number],
    programSlopePerHour: programSlopeMiB * mib,
    v8SlopePerHour: 2.4 * mib,
    grows: false,
  });
  // V8's metadata rose (the fitted objects too): the program's data is flat, so it does not grow.
  const series = [fitted('worker:c0:1/heap-objects-after-gc', true), fitted('worker:c0:1/heap', false), fitted('worker:w0:2/heap-objects-after-gc', true)];
  const snapshots = [pair('worker:c0:1', 0.02), pair('balancer:b0:3', 1.6)];
  judgeBySnapshots(series, snapshots, true);
  assert.equal(series[0]!.grows, false);
  assert.match(series[0]!.note ?? '', /^judged by its heap snapshots: the program's data \+0\.02 MiB\/h, V8's metadata \+2\.40 MiB\/h$/);
  assert.match(series[1]!.note ?? '', /^judged by its heap snapshots/);
  // No snapshots of w0 (started again after the first): its fitted series stands.
  assert.equal(series[2]!.grows, true);
  assert.equal(series[2]!.note, undefined);
  // The program's data growing 1.6 MiB/h: a leak.
  assert.equal(snapshots[0]!.grows, false);
  assert.equal(snapshots[1]!.grows, true);
  // Not judged on short runs.
  const short = [pair('balancer:b0:3', 5)];
  judgeBySnapshots([], short, false);
  assert.equal(short[0]!.grows, false);
});
