/**
 * The soak's heap snapshots (faults/src/heap-snapshot.ts): what JavaScript keeps shows in the
 * program's data and not in V8's metadata, and a process started with snapshotNodeOptions writes
 * one on SIGUSR2.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { test } from 'node:test';
import * as v8 from 'node:v8';
import { snapshotNodeOptions, summarizeHeapSnapshot, takeHeapSnapshot } from '../src/heap-snapshot';

const mib = 2 ** 20;

function snapshotOfThisProcess(dir: string) {
  const file = v8.writeHeapSnapshot(path.join(dir, `self-${Date.now()}.heapsnapshot`));
  try {
    return summarizeHeapSnapshot(JSON.parse(fs.readFileSync(file, 'utf8')));
  } finally {
    fs.rmSync(file);
  }
}

test("objects kept by JavaScript count as the program's data, not as V8's metadata", (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-heap-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const before = snapshotOfThisProcess(dir);
  assert.ok(before.program > mib && before.v8 > mib, `both parts counted: ${JSON.stringify(before)}`);
  // A leak: 100,000 records with a string each, about 8 MiB, kept until the second snapshot.
  const kept = Array.from({ length: 100_000 }, (_, i) => ({ id: i, name: `task-${i}-${'x'.repeat(20)}` }));
  const after = snapshotOfThisProcess(dir);
  assert.equal(kept.length, 100_000);
  const programGrew = after.program - before.program;
  const v8Grew = after.v8 - before.v8;
  assert.ok(programGrew > 6 * mib, `the program's data grew by ${(programGrew / mib).toFixed(2)} MiB`);
  assert.ok(Math.abs(v8Grew) < 1 * mib, `V8's metadata moved by ${(v8Grew / mib).toFixed(2)} MiB only`);
});

test('a process started with snapshotNodeOptions writes a snapshot on SIGUSR2, which is read and deleted', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-heap-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['-e', "process.send('up'); setInterval(() => {}, 1000)"], {
    env: { ...process.env, NODE_OPTIONS: snapshotNodeOptions(dir) },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  t.after(() => child.kill('SIGKILL'));
  await new Promise((resolve) => child.once('message', resolve));
  const summary = await takeHeapSnapshot(child.pid!, dir, 30_000);
  assert.ok(summary.program > 100_000 && summary.v8 > 100_000, JSON.stringify(summary));
  assert.deepEqual(fs.readdirSync(dir), [], 'the snapshot file is deleted once read');
});

test('a process that writes no snapshot is reported after the timeout', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-heap-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // Started without the option: SIGUSR2 would end it, so it ignores the signal instead.
  const child = spawn(process.execPath, ['-e', "process.on('SIGUSR2', () => {}); process.send('up'); setInterval(() => {}, 1000)"], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  t.after(() => child.kill('SIGKILL'));
  await new Promise((resolve) => child.once('message', resolve));
  await assert.rejects(takeHeapSnapshot(child.pid!, dir, 1500), /wrote no complete heap snapshot .* within 1500 ms/);
});
