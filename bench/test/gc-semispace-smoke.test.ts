/**
 * Keeps the gc-semispace benchmark from rotting: runs it in smoke mode (one short run of each
 * size, tiny load) as its own process, as `npm run bench -- gc-semispace --smoke` would, and
 * checks the JSON it writes. It asserts that the figures exist and that each run had the size it
 * was meant to have, never how much GC there was.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { gcKinds } from '../src/fleet/gc-totals';
import type { GcSemiSpaceResult } from '../src/gc-semispace';
import { runSmoke } from './smoke-run';

const timeoutMs = 45_000;

test('the gc-semispace benchmark runs end to end in smoke mode and writes the GC figures of both sizes', { timeout: timeoutMs + 15_000 }, async (t) => {
  const result = await runSmoke<GcSemiSpaceResult>(t, 'gc-semispace', timeoutMs);

  assert.equal(result.benchmark, 'gc-semispace');
  assert.equal(result.mode, 'smoke');
  const sizes = result.settings.semiSpaceSizesMb;
  assert.equal(sizes.length, 2);
  // Alternating: size 1, size 2, size 1, ...
  assert.deepEqual(
    result.runs.map((run) => run.semiSpaceSizeMb),
    Array.from({ length: result.settings.repetitions * 2 }, (_unused, index) => sizes[index % 2]),
  );
  for (const run of result.runs) {
    const what = `run #${run.repetition} at ${run.semiSpaceSizeMb} MiB`;
    assert.ok(run.windowMs >= result.settings.windowMs, `${what}: window of ${run.windowMs} ms`);
    assert.ok(Number.isFinite(run.gcPercentOfWall) && run.gcPercentOfWall >= 0, `${what}: GC ${run.gcPercentOfWall}%`);
    assert.deepEqual(Object.keys(run.gcPercentOfWallByKind).sort(), [...gcKinds].sort(), what);
    for (const counts of [run.gcCountByKind, run.gcCountByKindByMetric]) {
      assert.ok(
        Object.values(counts).every((n) => Number.isInteger(n) && n >= 0),
        `${what}: GC counts ${JSON.stringify(counts)}`,
      );
    }
    for (const figure of [run.eventLoopUtilizationPercent, run.workerCpuPercentOfCore, run.handlerMeanMs, run.heapUsedMeanMiB, run.heapLimitMiB]) {
      assert.ok(Number.isFinite(figure) && figure > 0, `${what}: ${JSON.stringify(run)}`);
    }
    // The flag reached V8: the young generation never grows past its two semi-spaces.
    assert.ok(run.newSpaceMaxMiB > 0 && run.newSpaceMaxMiB <= 2 * run.semiSpaceSizeMb, `${what}: young generation of ${run.newSpaceMaxMiB} MiB`);
    assert.ok(run.load.succeeded > 0 && run.load.latency.count > 0, `${what}: no load`);
  }
  // The larger semi-space gives V8 a larger heap limit: the sizes really differed.
  assert.ok(result.summaries[1].heapLimitMiB > result.summaries[0].heapLimitMiB, JSON.stringify(result.summaries));
  for (const summary of result.summaries) assert.ok(Number.isFinite(summary.figures.gcPercentOfWall.median));
  assert.ok(result.ratios.gcPercentOfWall === null || Number.isFinite(result.ratios.gcPercentOfWall));
});
