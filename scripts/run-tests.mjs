#!/usr/bin/env node
// Runs every compiled test file (<package>/dist/test/**/*.test.js) with node's test runner.
// Node 20's runner takes no globs, so we list the files. A test file that leaves an
// unhandled rejection fails (node's default --unhandled-rejections=throw).
import { readdirSync, existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

const root = new URL('..', import.meta.url).pathname;
const packages = JSON.parse(await import('node:fs').then((fs) => fs.readFileSync(join(root, 'package.json'), 'utf8'))).workspaces;
const filter = process.argv.slice(2);

function collect(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return collect(path);
    return name.endsWith('.test.js') ? [path] : [];
  });
}

const files = packages
  .flatMap((pkg) => collect(join(root, pkg, 'dist', 'test')))
  .filter((file) => filter.length === 0 || filter.some((f) => file.includes(f)));
if (files.length === 0) {
  console.error('no test files found: run `npm run build` first');
  process.exit(1);
}
// Test files run one at a time: several start processes and load the 2 shared cores.
const result = spawnSync(process.execPath, ['--test', '--test-concurrency=1', ...files], { stdio: 'inherit', cwd: root });
process.exit(result.status ?? 1);
