import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { oldGenerationLimitBytes } from '../src/index';

const mib = 2 ** 20;

test('the old generation limit: --max-old-space-size when given, else the heap limit less the young generation', () => {
  // heap_size_limit as V8 reports it: old + 3 semi-spaces (16 MiB each by default).
  assert.equal(oldGenerationLimitBytes(112 * mib, ['--max-old-space-size=64']), 64 * mib);
  assert.equal(oldGenerationLimitBytes(112 * mib, ['--max_old_space_size', '64']), 64 * mib);
  // The last one wins, as in V8; NODE_OPTIONS comes after the command line in nodeFlags().
  assert.equal(oldGenerationLimitBytes(176 * mib, ['--max-old-space-size=64', '--max-old-space-size=128']), 128 * mib);
  assert.equal(oldGenerationLimitBytes(4108 * mib, ['--max-semi-space-size=4']), 4096 * mib);
  assert.equal(oldGenerationLimitBytes(4144 * mib, []), 4096 * mib);
  // A small machine: V8 sized both generations itself (semi-space about old ÷ 128).
  const small = oldGenerationLimitBytes(259 * mib, []);
  assert.ok(small > 250 * mib && small < 259 * mib, `${small / mib} MiB`);
  // Garbage is not a limit.
  assert.equal(oldGenerationLimitBytes(4144 * mib, ['--max-old-space-size=abc']), 4096 * mib);
});

test('a leaking process reaches a heap share near 1 before it runs out of memory', { timeout: 60_000 }, async () => {
  // A child on a small old generation leaks until V8 gives up; it prints its share each step.
  // Steps are small (about 30 KiB) so the last sample lands close to where V8 gave up.
  const script = `
    const { RuntimeSampler } = require(${JSON.stringify(require.resolve('../src/index'))});
    const sampler = new RuntimeSampler();
    const kept = [];
    let i = 0;
    setInterval(() => {
      for (let k = 0; k < 200; k++) kept.push({ text: 'x'.repeat(100) + i++ });
      const s = sampler.sample();
      process.stdout.write((s.heapUsedBytes / s.heapLimitBytes).toFixed(3) + '\\n');
    }, 2);`;
  const child = spawn(process.execPath, ['--max-old-space-size=48', '-e', script], { stdio: ['ignore', 'pipe', 'ignore'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const shares = output.trim().split('\n').map(Number);
  const highest = Math.max(...shares);
  assert.notEqual(exitCode, 0, 'the child should have run out of memory');
  // With V8's heap_size_limit as the divisor (48 + 48 MiB) the share stopped near 0.5 here. With
  // the old generation's limit it ends between 0.94 and 0.98 on Node 22 (with steps ten times
  // larger, 0.75-0.94: the last sample could come well before the end).
  assert.ok(highest > 0.8, `highest share before running out of memory: ${highest}`);
  assert.ok(highest <= 1.05, `highest share before running out of memory: ${highest}`);
});

test('a GC pause that ended before a sample does not count against the next, short one', { timeout: 60_000 }, async () => {
  // A child with a big heap runs a full GC, samples before the GC's entry is delivered, waits
  // for the entry, then samples again 1-2 ms later: that window held no GC.
  const script = `
    const { PerformanceObserver } = require('node:perf_hooks');
    const { RuntimeSampler } = require(${JSON.stringify(require.resolve('../src/index'))});
    const sampler = new RuntimeSampler();
    const kept = Array.from({ length: 300000 }, (_, i) => ({ i, text: 'x' + i }));
    let pauseMs = 0;
    const seen = new Promise((resolve) => new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) pauseMs += entry.duration;
      resolve();
    }).observe({ entryTypes: ['gc'] }));
    const alive = setInterval(() => {}, 1000);
    global.gc();
    sampler.sample();
    seen.then(() => {
      const share = sampler.sample().gcTimeRatio;
      process.stdout.write(JSON.stringify({ share, pauseMs, kept: kept.length }));
      clearInterval(alive);
    });`;
  const child = spawn(process.execPath, ['--expose-gc', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exitCode = await new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  assert.equal(exitCode, 0);
  const { share, pauseMs } = JSON.parse(output) as { share: number; pauseMs: number };
  assert.ok(pauseMs > 0, 'the child should have seen its GC pause');
  assert.equal(share, 0, `GC share of a window after the pause (the pause took ${pauseMs} ms)`);
});
