/**
 * Keeps the overhead benchmark from rotting: runs it in smoke mode (seconds, tiny load) as
 * its own process, as `npm run bench -- overhead --smoke` would, and checks the JSON it writes.
 * It asserts that figures exist and are sane, never how good they are.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { LatencySummary } from '../src/report/histogram';
import type { OverheadResult } from '../src/overhead';

const runScript = path.join(__dirname, '..', 'src', 'run.js');
const timeoutMs = 45_000;

function runSmoke(outPath: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [runScript, 'overhead', '--smoke', '--out', outPath], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    // SIGTERM lets the benchmark stop its fleet and delete its keys.
    const timer = setTimeout(() => child.kill('SIGTERM'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

function assertLatency(what: string, latency: LatencySummary): void {
  assert.ok(latency.count > 0, `${what}: no latencies recorded`);
  for (const field of ['p50Ms', 'p99Ms', 'maxMs'] as const) {
    assert.ok(Number.isFinite(latency[field]) && latency[field] > 0, `${what}: ${field} is ${latency[field]}`);
  }
  assert.ok(latency.p50Ms <= latency.p99Ms && latency.p99Ms <= latency.maxMs, `${what}: percentiles out of order ${JSON.stringify(latency)}`);
}

test('the overhead benchmark runs end to end in smoke mode and writes sane JSON', { timeout: timeoutMs + 15_000 }, async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-bench-smoke-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const outPath = path.join(dir, 'overhead.json');

  const { code, output } = await runSmoke(outPath);
  assert.equal(code, 0, `the benchmark exited with ${code}:\n${output}`);
  const result = JSON.parse(fs.readFileSync(outPath, 'utf8')) as OverheadResult;

  assert.equal(result.benchmark, 'overhead');
  assert.equal(result.mode, 'smoke');
  assert.ok(result.machine.nproc >= 1);
  assert.ok(result.ceiling.balancerTasksPerSecond > 0, 'no throughput through the balancer');
  assert.ok(result.ceiling.directTasksPerSecond > 0, 'no throughput straight to the workers');
  for (const run of result.ceiling.runs) assertLatency(`ceiling ${run.target}`, run.latency);

  assert.ok(result.latency.length >= 1, 'no latency level measured');
  for (const level of result.latency) {
    assert.equal(level.repetitions.length, result.settings.latency.repetitions);
    for (const { direct, balancer } of level.repetitions) {
      assertLatency(`${level.label} direct`, direct.latency);
      assertLatency(`${level.label} balancer`, balancer.latency);
      assert.ok(direct.tasksPerSecond > 0 && balancer.tasksPerSecond > 0);
    }
    assert.ok(Number.isFinite(level.addedP50Ms.median) && Number.isFinite(level.addedP99Ms.median), 'added latency missing');
  }
  assert.deepEqual(
    result.goals.map((goal) => typeof goal.met),
    result.goals.map(() => 'boolean'),
  );
});
