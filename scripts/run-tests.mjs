#!/usr/bin/env node
// Runs every compiled test file (<package>/dist/test/**/*.test.js), each in a `node --test` of its
// own, a few at a time, and ends with a summary: totals, the slowest files, and every failure
// with its file (a CI log is often read from its end).
//
// Arguments filter the files by a fragment of their path; an argument that is a .js file runs as
// is; `--unit` keeps the unit test files alone (*.unit.test.js: no process started, no connection
// opened). `--concurrency N` (or HEADROOM_TEST_CONCURRENCY) sets how many files run at once; files
// under a heavy folder (see heavyFolders) start whole fleets of processes: a heavy file that judges
// time runs with no other heavy file and at most one light file beside it, the other heavy files
// two at once (or one per two cores), always beside light ones. A test file that leaves an unhandled rejection fails (node's default).
import { readdirSync, existsSync, statSync, readFileSync } from 'node:fs';
import { join, resolve, relative } from 'node:path';
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';

const root = new URL('..', import.meta.url).pathname;
const packages = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;
/** Files that start fleets of processes (balancers, workers, Unleash, Chromium): at most maxHeavyAtOnce of them run at once. */
const heavyFolders = ['faults/', 'bench/', 'ui/', 'demo/', 'deploy/'];
/**
 * Files under a heavy folder that start no fleet (a process or two, or static checks of files): they
 * run as light ones. Not the long ledger model: it takes a whole core for a minute, and beside it a
 * fault test that judges time failed (a worker marked in an outage that hit every worker alike).
 */
const noFleetFiles = [
  'faults/dist/test/ledger-watch',
  'faults/dist/test/heap-snapshot',
  'deploy/dist/test/compose',
  'deploy/dist/test/k8s',
  'deploy/dist/test/promtool',
  'deploy/dist/test/dockerfile',
];
const maxHeavyAtOnce = Math.max(2, Math.floor(availableParallelism() / 2));
/**
 * Heavy files that judge time or rates under a set load (how soon a fault is over, latency ratios,
 * a stalled event loop): no other heavy file runs beside them. On 2 cores, a second fleet beside
 * them made them fail (a rollback 23 s after an incident against a bound of 21.5 s, a spike's
 * background tasks all refused); the heavy files left (pages drawn, artefacts checked, benchmarks
 * run in smoke mode) judge no time and run two at once.
 */
const timingFiles = [
  'faults/dist/test/faults-on-cluster',
  'faults/dist/test/process-faults',
  'faults/dist/test/proxyless-faults',
  'faults/dist/test/shared-state-faults',
  'faults/dist/test/slow-upstream',
  'faults/dist/test/limit-faults',
  'faults/dist/test/redis-failover',
  'faults/dist/test/redis-cluster',
  'faults/dist/test/incident-recovery',
  'faults/dist/test/failing-worker',
  'faults/dist/test/rollout-',
  'faults/dist/test/soak.test',
  'bench/dist/test/autopilot-smoke',
  'bench/dist/test/rollback-smoke',
  'ui/dist/test/workers-page',
  'ui/dist/test/integration-trouble',
  'ui/dist/test/scale',
];
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
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--concurrency') concurrency = Number(argv[++i]);
    else if (argv[i] === '--unit') unitOnly = true;
    else rest.push(argv[i]);
  }
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 16) {
    console.error(`run-tests: --concurrency (or HEADROOM_TEST_CONCURRENCY) must be a whole number from 1 to 16, got ${JSON.stringify(String(concurrency))}`);
    process.exit(2);
  }
  return { concurrency, unitOnly, rest };
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

const startsWithAny = (file, prefixes) => prefixes.some((prefix) => relative(root, file).startsWith(prefix));
const isHeavy = (file) => startsWithAny(file, heavyFolders) && !startsWithAny(file, noFleetFiles) && !file.endsWith('.unit.test.js');
const judgesTime = (file) => startsWithAny(file, timingFiles);
// The files that judge time first: the heavy files left then run two at once to the end.
const startRank = (file) => {
  const rank = longFirst.findIndex((prefix) => relative(root, file).startsWith(prefix));
  return (judgesTime(file) ? 0 : longFirst.length + 1) + (rank === -1 ? longFirst.length : rank);
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

const { concurrency, unitOnly, rest } = parseArgs(process.argv.slice(2));
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
  const timingRunning = heavyRuns.some((run) => judgesTime(run.file));
  // One light file at most beside a file that judges time: on a busy day two beside them failed
  // recovery and latency-ratio bounds that held with the machine to themselves.
  if (timingRunning && running.size >= 2) return undefined;
  const next = waitingHeavy[0];
  if (next && !timingRunning && heavyRuns.length < maxHeavyAtOnce && (!judgesTime(next) || heavyRuns.length === 0)) return waitingHeavy.shift();
  return waitingLight.shift();
}

function startFile(file) {
  const child = spawn(process.execPath, ['--test', '--test-reporter=tap', file], { cwd: root, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const run = { file, heavy: isHeavy(file), startedAt: performance.now(), chunks: [], bytes: 0, timedOut: false };
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
  else if (!ok && tap.failed.length === 0) tap.failed.push(`the file exited with ${code ?? signal}`);
  const name = relative(root, run.file);
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
