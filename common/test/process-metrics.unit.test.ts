import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { PerformanceObserver } from 'node:perf_hooks';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { Registry } from 'prom-client';
import { registerProcessMetrics } from '../src/index';

test('process metrics: every GC pause is counted, event-loop utilisation and heap limit are there', async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  const count = async () => {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === 'nodejs_gc_duration_seconds');
    const values = (metric?.values ?? []) as { metricName?: string; value: number }[];
    return values.filter((v) => v.metricName === 'nodejs_gc_duration_seconds_count').reduce((sum, v) => sum + v.value, 0);
  };
  // Short-lived garbage in bursts: many scavenges close together, as in a busy parallel worker.
  const before = await count();
  let seen = 0;
  const observer = new PerformanceObserver((list) => (seen += list.getEntries().length));
  observer.observe({ entryTypes: ['gc'] });
  for (let round = 0; round < 20; round++) {
    let keep: unknown[] = [];
    for (let i = 0; i < 200_000; i++) keep.push({ i, text: `item ${i}` });
    keep = [];
    await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
  observer.disconnect();
  const counted = (await count()) - before;
  assert.ok(seen > 5, `the workload made ${seen} collections`);
  assert.ok(counted >= seen, `counted ${counted} of ${seen} GC pauses`);
  const text = await registry.metrics();
  assert.match(text, /^headroom_eventloop_utilization_ratio [\d.e-]+$/m);
  assert.match(text, /^headroom_heap_limit_bytes \d{7,}$/m);
  assert.match(text, /^nodejs_heap_size_used_bytes \d+$/m);
});

test('process metrics: the heap after a full collection follows what survives it, not the garbage', async () => {
  const registry = new Registry();
  registerProcessMetrics(registry);
  // A full collection on demand, as `node --expose-gc` gives it.
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  const afterGc = async () => {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 50)); // perf_hooks delivers the entry
    const match = /^headroom_heap_after_major_gc_bytes (\d+)$/m.exec(await registry.metrics());
    assert.ok(match, 'the gauge is exposed');
    return Number(match[1]);
  };
  const empty = await afterGc();
  assert.ok(empty > 1_000_000, `a heap after GC of ${empty} bytes`);
  let kept: string[] = Array.from({ length: 200_000 }, (_, i) => `kept item ${i}`.padEnd(100, '.'));
  const full = await afterGc();
  assert.ok(full - empty > 20_000_000, `kept ~25 MB: ${empty} -> ${full} bytes`);
  assert.equal(kept.length, 200_000);
  kept = [];
  const freed = await afterGc();
  assert.ok(full - freed > 20_000_000, `freed: ${full} -> ${freed} bytes`);
});

test("process metrics: the heap after GC splits into V8's code and the program's objects, and a leak shows in the objects", async () => {
  const registry = new Registry();
  registerProcessMetrics(registry, { minCodeStatisticsIntervalMs: 0 });
  v8.setFlagsFromString('--expose-gc');
  // So that V8 does not flush bytecode of older code meanwhile, which would blur the rise below.
  v8.setFlagsFromString('--no-flush-bytecode');
  const gc = vm.runInNewContext('gc') as () => void;
  const read = async () => {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const text = await registry.metrics();
    const value = (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN);
    return {
      total: value('headroom_heap_after_major_gc_bytes'),
      code: value('headroom_heap_code_after_major_gc_bytes'),
      objects: value('headroom_heap_objects_after_major_gc_bytes'),
    };
  };
  const before = await read();
  assert.ok(before.code > 100_000, `V8's code: ${before.code} bytes`);
  assert.equal(before.objects + before.code, before.total);
  // Code compiled for the first time raises the code, not the objects.
  const compiled = Array.from(
    { length: 2000 },
    (_, i) =>
      new Function('a', `let s = a; for (let j = 0; j < ${i}; j++) { s = (s * 31 + j) % 1000003; if (s % 7 === ${i % 7}) s += ${i}; } return s + ${i};`) as (
        a: number,
      ) => number,
  );
  let sum = 0;
  for (const f of compiled) sum += f(1);
  const leaked: string[] = Array.from({ length: 100_000 }, (_, i) => `leaked item ${i}`.padEnd(100, '.'));
  const after = await read();
  assert.ok(after.code - before.code > 200_000, `2,000 functions compiled: code ${before.code} -> ${after.code} bytes`);
  assert.ok(after.objects - before.objects > 10_000_000, `~12 MB kept: objects ${before.objects} -> ${after.objects} bytes`);
  assert.equal(leaked.length + compiled.length, 102_000);
  assert.ok(sum > 0);
});
