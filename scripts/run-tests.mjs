#!/usr/bin/env node
// Runs every compiled test file (<package>/dist/test/**/*.test.js) with node's test runner.
// Node 20's runner takes no globs, so we list the files. A test file that leaves an
// unhandled rejection fails (node's default --unhandled-rejections=throw).
// Arguments filter the files by a fragment of their path; an argument that is a .js file runs as is.
import { readdirSync, existsSync, statSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;
const packages = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).workspaces;
const args = process.argv.slice(2);
const explicitFiles = args.filter((arg) => arg.endsWith('.js') && existsSync(arg)).map((arg) => resolve(arg));
const filter = args.filter((arg) => !explicitFiles.includes(resolve(arg)));
/** How often we check that whoever started us (npm, a shell, CI) is still there. */
const parentCheckMs = 1000;
/** How long the tests get to stop on SIGTERM before the rest of their group is killed. */
const stopGraceMs = 5000;

function collect(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return collect(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

const collected = explicitFiles.length > 0 && filter.length === 0 ? [] : packages.flatMap((pkg) => collect(join(root, pkg, 'dist', 'test')));
const files = [...explicitFiles, ...collected.filter((file) => filter.length === 0 || filter.some((f) => file.includes(f)))];
if (files.length === 0) {
  console.error('no test files found: run `npm run build` first');
  process.exit(1);
}
// Test files run one at a time: several start processes and load the 2 shared cores.
// The runner gets a process group of its own, so that one signal reaches it, every test file it
// started and what they started (private redis-servers, workers, balancers): none may outlive
// this script, which itself stops when its parent goes away, even by SIGKILL.
const runner = spawn(process.execPath, ['--test', '--test-concurrency=1', ...files], { stdio: 'inherit', cwd: root, detached: true });
const parentPid = process.ppid;
let stopping = false;

function signalGroup(signal) {
  try {
    process.kill(-runner.pid, signal);
  } catch {
    // The group is gone already.
  }
}

function stopTests(why) {
  if (stopping) return;
  stopping = true;
  console.error(`run-tests: ${why}; stopping the tests`);
  signalGroup('SIGTERM');
  setTimeout(() => signalGroup('SIGKILL'), stopGraceMs).unref();
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, () => stopTests(`got ${signal}`));
const parentWatch = setInterval(() => {
  if (process.ppid !== parentPid) stopTests(`its parent (pid ${parentPid}) is gone`);
}, parentCheckMs);
runner.on('exit', (code, signal) => {
  clearInterval(parentWatch);
  // What the test files started and left behind goes with them.
  signalGroup('SIGKILL');
  process.exit(code ?? (signal ? 1 : 0));
});
