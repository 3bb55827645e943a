#!/usr/bin/env node
// Runs every compiled test file (<package>/dist/test/**/*.test.js), each in a `node --test` of its
// own, a few at a time, and ends with a summary: totals, the slowest files, and every failure
// with its file (a CI log is often read from its end).
//
// Arguments filter the files by a fragment of their path; an argument that is a .js file runs as
// is; `--unit` keeps the unit test files alone (*.unit.test.js: no process started, no connection
// opened). `--concurrency N` (or HEADROOM_TEST_CONCURRENCY) sets how many files run at once; files
// under a heavy folder (see heavyFolders) start whole fleets of processes, and at most one per two cores of
// them run at once, beside the light ones. A test file that leaves an unhandled rejection fails (node's default).
// `--lint` also runs `npm run lint` as a heavy job, after the quiet files (it takes more than a
// core for a minute, so none may run beside it), overlapping the tests; its problems fail the run like a failed file.
import { readdirSync, existsSync, statSync, readFileSync } from 'node:fs';
import { join, resolve, relative } from 'node:path';
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';

const root = new URL('..', import.meta.url).pathname;
const packages = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;
/** Files that start fleets of processes (balancers, workers, Unleash, Chromium): at most maxHeavyAtOnce of them run at once. */
const heavyFolders = ['faults/', 'bench/', 'ui/', 'demo/', 'deploy/'];
// One per two cores: on 2 cores two fleets at once starved the fault and rollout tests that judge
// timing (4 failures in a fresh run), so they run one at a time there, beside light files.
const maxHeavyAtOnce = Math.max(1, Math.floor(availableParallelism() / 2));
/** Heavy files whose figures are rates under a set load (an incident's recovery, a failing worker's share): no other heavy file runs beside them. */
const quietFiles = ['faults/dist/test/incident-recovery', 'faults/dist/test/failing-worker'];
/** Where the longest files are (the fault suite, the rollout tests): they start first, so that the run does not end waiting on one of them. */
const longFirst = ['faults/', 'control-plane/dist/test/rollouts', 'bench/', 'demo/', 'control-plane/'];
/** How often we check that whoever started us (npm, a shell, CI) is still there. */
const parentCheckMs = 1000;
/** How long the tests get to stop on SIGTERM before the rest of their group is killed. */
const stopGraceMs = 5000;
/** A file still running after this long is stopped and counted as failed: a run must end. */
const fileTimeoutMs = Number(process.env.HEADROOM_TEST_FILE_TIMEOUT_MS ?? 15 * 60_000);
/** How long a finished file's output may take to reach its end. */
const outputDrainMs = 2000;
/** What a file may print that we keep (its end is what tells why it failed). */
const maxOutputBytes = 4 * 1024 * 1024;

function parseArgs(argv) {
  const rest = [];
  let concurrency = Number(process.env.HEADROOM_TEST_CONCURRENCY ?? Math.min(3, availableParallelism() + 1));
  let unitOnly = false;
  let lint = false;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--concurrency') concurrency = Number(argv[++i]);
    else if (argv[i] === '--unit') unitOnly = true;
    else if (argv[i] === '--lint') lint = true;
    else rest.push(argv[i]);
  }
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 16) {
    console.error(`run-tests: --concurrency (or HEADROOM_TEST_CONCURRENCY) must be a whole number from 1 to 16, got ${JSON.stringify(String(concurrency))}`);
    process.exit(2);
  }
  return { concurrency, unitOnly, lint, rest };
}

function collect(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return collect(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

function listFiles(args) {
  const explicitFiles = args.filter((arg) => arg.endsWith('.js') && existsSync(arg)).map((arg) => resolve(arg));
  const filter = args.filter((arg) => !explicitFiles.includes(resolve(arg)));
  const collected = explicitFiles.length > 0 && filter.length === 0 ? [] : packages.flatMap((pkg) => collect(join(root, pkg, 'dist', 'test')));
  return [...explicitFiles, ...collected.filter((file) => filter.length === 0 || filter.some((f) => file.includes(f)))];
}

const isHeavy = (file) => heavyFolders.some((folder) => relative(root, file).startsWith(folder));
const isQuiet = (file) => quietFiles.some((prefix) => relative(root, file).startsWith(prefix));
const startRank = (file) => {
  const rank = longFirst.findIndex((prefix) => relative(root, file).startsWith(prefix));
  return rank === -1 ? longFirst.length : rank;
};

/** The counts node's runner prints at its end ("# pass 12"), and the names of what failed. */
function readTap(output) {
  const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, 'm').exec(output)?.[1] ?? 0);
  const failed = [...output.matchAll(/^\s*not ok \d+ - (.*)$/gm)].map((m) => m[1]);
  return {
    tests: count('tests'),
    pass: count('pass'),
    fail: count('fail'),
    cancelled: count('cancelled'),
    skipped: count('skipped'),
    todo: count('todo'),
    failed,
  };
}

const { concurrency, unitOnly, lint, rest } = parseArgs(process.argv.slice(2));
/** Not a test file: the job that runs the linters, named so in the summary. */
const lintJob = 'npm run lint';
// Unit test files (*.unit.test.js) start no process and open no connection: the quick tier.
const files = listFiles(rest).filter((file) => !unitOnly || file.endsWith('.unit.test.js'));
if (files.length === 0) {
  console.error('no test files found: run `npm run build` first');
  process.exit(1);
}

// Each file runs in a process group of its own, so that one signal reaches it and what it started
// (private redis-servers, workers, balancers): none may outlive this script, which itself stops
// when its parent goes away, even by SIGKILL.
const running = new Map();
const results = [];
const byStartRank = (a, b) => startRank(a) - startRank(b);
const waitingHeavy = files.filter(isHeavy).sort(byStartRank);
if (lint) waitingHeavy.splice(waitingHeavy.findLastIndex(isQuiet) + 1, 0, lintJob);
const waitingLight = files.filter((file) => !isHeavy(file)).sort(byStartRank);
const startedAt = performance.now();
const parentPid = process.ppid;
let stopping = false;

function signalGroup(pid, signal) {
  try {
    process.kill(-pid, signal);
  } catch {
    // The group is gone already.
  }
}

function stopTests(why) {
  if (stopping) return;
  stopping = true;
  console.error(`run-tests: ${why}; stopping the tests`);
  for (const child of running.keys()) signalGroup(child.pid, 'SIGTERM');
  setTimeout(() => {
    for (const child of running.keys()) signalGroup(child.pid, 'SIGKILL');
    process.exit(1);
  }, stopGraceMs).unref();
}

function nextFile() {
  const heavyRuns = [...running.values()].filter((run) => run.heavy);
  const quietRunning = heavyRuns.some((run) => isQuiet(run.file));
  const next = waitingHeavy[0];
  if (next && !quietRunning && heavyRuns.length < maxHeavyAtOnce && (!isQuiet(next) || heavyRuns.length === 0)) return waitingHeavy.shift();
  return waitingLight.shift();
}

function startFile(file) {
  const [command, args] = file === lintJob ? ['npm', ['run', 'lint']] : [process.execPath, ['--test', '--test-reporter=tap', file]];
  const child = spawn(command, args, { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const run = { file, heavy: file === lintJob || isHeavy(file), startedAt: performance.now(), chunks: [], bytes: 0, timedOut: false };
  const keep = (chunk) => {
    run.chunks.push(chunk);
    run.bytes += chunk.length;
    while (run.bytes > maxOutputBytes && run.chunks.length > 1) run.bytes -= run.chunks.shift().length;
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const timer = setTimeout(() => {
    run.timedOut = true;
    signalGroup(child.pid, 'SIGKILL');
  }, fileTimeoutMs);
  running.set(child, run);
  child.on('exit', (code, signal) => {
    clearTimeout(timer);
    // What the test file started and left behind goes with it.
    signalGroup(child.pid, 'SIGKILL');
    // Its output is read to the end, unless something outside its group holds the pipes open.
    const done = () => {
      if (!running.delete(child)) return;
      finishFile(run, code, signal);
      schedule();
    };
    child.once('close', done);
    setTimeout(done, outputDrainMs).unref();
  });
}

function finishFile(run, code, signal) {
  const output = Buffer.concat(run.chunks).toString('utf8');
  const durationMs = performance.now() - run.startedAt;
  const tap = readTap(output);
  const ok = code === 0 && !run.timedOut;
  if (run.timedOut) tap.failed.push(`the file ran past ${fileTimeoutMs} ms (HEADROOM_TEST_FILE_TIMEOUT_MS) and was stopped`);
  else if (!ok && run.file === lintJob) tap.failed.push('the linters found problems (their output is above; `npm run format` fixes the formatting)');
  else if (!ok && tap.failed.length === 0) tap.failed.push(`the file exited with ${code ?? signal}`);
  const name = run.file === lintJob ? lintJob : relative(root, run.file);
  results.push({ file: name, durationMs, ok, ...tap });
  process.stdout.write(`# ━━ ${name}: ${ok ? 'ok' : 'FAILED'}, ${tap.pass} passed, ${tap.fail} failed, ${(durationMs / 1000).toFixed(1)} s\n${output}\n`);
}

function schedule() {
  if (stopping) return;
  while (running.size < concurrency) {
    const file = nextFile();
    if (!file) break;
    startFile(file);
  }
  if (running.size === 0) summarize();
}

function summarize() {
  clearInterval(parentWatch);
  const sum = (key) => results.reduce((total, r) => total + r[key], 0);
  const failedFiles = results.filter((r) => !r.ok);
  const lines = [
    `# ━━ ${results.length} files, ${sum('tests')} tests: ${sum('pass')} passed, ${sum('fail')} failed, ${sum('cancelled')} cancelled, ${sum('skipped')} skipped, ${sum('todo')} todo; ${((performance.now() - startedAt) / 1000).toFixed(0)} s with ${concurrency} files at once`,
    '# the slowest files:',
    ...[...results]
      .sort((a, b) => b.durationMs - a.durationMs)
      .slice(0, 12)
      .map((r) => `#   ${(r.durationMs / 1000).toFixed(1).padStart(7)} s  ${r.file}`),
    ...failedFiles.flatMap((r) => [`# FAILED ${r.file}:`, ...r.failed.map((name) => `#   not ok - ${name}`)]),
  ];
  console.log(lines.join('\n'));
  process.exit(failedFiles.length > 0 || sum('cancelled') > 0 ? 1 : 0);
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stopTests(`got ${signal}`));
const parentWatch = setInterval(() => {
  if (process.ppid !== parentPid) stopTests(`its parent (pid ${parentPid}) is gone`);
}, parentCheckMs);
schedule();
