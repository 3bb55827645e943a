/**
 * The test runner (scripts/run-tests.mjs) stops the tests it started, and what they started,
 * when its parent (npm, CI) goes away, even by SIGKILL, or when it is signalled itself: killed
 * test runs must not leave stacks loading the machine.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { eventually, isProcessAlive } from '@headroom/testkit';

const runTestsScript = path.join(__dirname, '..', '..', '..', 'scripts', 'run-tests.mjs');
const endlessTest = path.join(__dirname, 'fixtures', 'endless-test.js');
/** The runner checks its parent every second and gives the tests 5 s after SIGTERM. */
const stopTimeoutMs = 20_000;

interface Started {
  standInPid: number;
  runnerPid: number;
  testFilePid: number;
  startedPid: number;
}

/** A stand-in for npm: it starts the runner on the endless test file, then idles until killed. */
async function startRun(t: TestContext): Promise<Started> {
  const pidsFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-run-tests-')), 'pids.json');
  const standInCode = `const c = require('node:child_process').spawn(process.execPath, ${JSON.stringify([runTestsScript, endlessTest])}, { stdio: 'ignore' });
    console.log(c.pid); setTimeout(() => {}, 120000);`;
  // Without NODE_TEST_CONTEXT, which this file's runner set: with it, a nested runner reports to us.
  const { NODE_TEST_CONTEXT: _nested, ...env } = process.env;
  const standIn = spawn(process.execPath, ['-e', standInCode], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...env, HEADROOM_PIDS_FILE: pidsFile } });
  const pids = new Set<number>([standIn.pid!]);
  t.after(() => {
    for (const pid of pids) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
    fs.rmSync(path.dirname(pidsFile), { recursive: true, force: true });
  });
  let stdout = '';
  standIn.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  const runnerPid = await eventually('the stand-in prints the runner pid', 15_000, () => (/^\d+\n/.test(stdout) ? Number.parseInt(stdout, 10) : undefined));
  pids.add(runnerPid);
  const written = await eventually('the endless test writes its pids', 30_000, () =>
    fs.existsSync(pidsFile) ? (JSON.parse(fs.readFileSync(pidsFile, 'utf8')) as { testFilePid: number; startedPid: number }) : undefined,
  );
  pids.add(written.testFilePid).add(written.startedPid);
  return { standInPid: standIn.pid!, runnerPid, ...written };
}

async function allGone(what: string, pids: number[]): Promise<void> {
  await eventually(what, stopTimeoutMs, () => (pids.every((pid) => !isProcessAlive(pid)) ? true : undefined));
}

test("the runner's parent killed with SIGKILL: the runner, the test file and what it started all stop", async (t) => {
  const run = await startRun(t);
  assert.ok([run.runnerPid, run.testFilePid, run.startedPid].every(isProcessAlive), `all running before the kill: ${JSON.stringify(run)}`);
  process.kill(run.standInPid, 'SIGKILL');
  await allGone(`the runner, the test file and its process stop after the parent's kill: ${JSON.stringify(run)}`, [
    run.runnerPid,
    run.testFilePid,
    run.startedPid,
  ]);
});

test('the runner signalled (Ctrl-C, a CI time limit): the test file and what it started stop', async (t) => {
  const run = await startRun(t);
  process.kill(run.runnerPid, 'SIGTERM');
  await allGone(`the test file and its process stop after SIGTERM to the runner: ${JSON.stringify(run)}`, [run.runnerPid, run.testFilePid, run.startedPid]);
});

/** Runs the runner to its end on the given arguments. */
async function runToEnd(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { NODE_TEST_CONTEXT: _nested, ...env } = process.env;
  const runner = spawn(process.execPath, [runTestsScript, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  runner.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  runner.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => runner.on('close', resolve));
  return { code, stdout, stderr };
}

test('the runner ends with totals over every file, and names each failure with its file', async () => {
  const fixtures = path.join(__dirname, 'fixtures');
  const { code, stdout } = await runToEnd(['--concurrency', '2', path.join(fixtures, 'all-pass-test.js'), path.join(fixtures, 'some-fail-test.js')]);
  assert.equal(code, 1, stdout);
  const summary = stdout.slice(stdout.lastIndexOf('# ━━ 2 files'));
  assert.match(summary, /^# ━━ 2 files, 4 tests: 3 passed, 1 failed, 0 cancelled/, stdout);
  assert.match(summary, /# FAILED testkit\/dist\/test\/fixtures\/some-fail-test\.js:\n# {3}not ok - a failing fixture test/, summary);
  assert.doesNotMatch(summary, /FAILED testkit\/dist\/test\/fixtures\/all-pass-test/, summary);
});

test('the runner refuses a bad --concurrency, naming it and what is accepted', async () => {
  const { code, stderr } = await runToEnd(['--concurrency', '0', endlessTest]);
  assert.equal(code, 2);
  assert.match(stderr, /--concurrency \(or HEADROOM_TEST_CONCURRENCY\) must be a whole number from 1 to 16, got "0"/);
});
