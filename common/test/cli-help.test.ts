/**
 * Every CLI's --help states each default once, taken from the schema: a description that also
 * states it would say it twice, and drift from the schema when one of them changes.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';

const repoRoot = path.join(__dirname, '..', '..', '..');
const clis = [
  'balancer/dist/src/cli.js',
  'worker/dist/src/cli.js',
  'control-plane/dist/src/cli.js',
  'demo/dist/src/cli.js',
  'sim/dist/src/bank/cli.js',
  'sim/dist/src/loadgen/cli.js',
];

for (const cli of clis) {
  test(`${cli} --help states each option's default at most once`, () => {
    const help = execFileSync(process.execPath, [path.join(repoRoot, cli), '--help'], { encoding: 'utf8', timeout: 30_000 });
    const options = help.split('\n').filter((line) => /^ {2}--/.test(line));
    assert.ok(options.length > 3, `options listed: ${help}`);
    const twice = options.filter((line) => (line.match(/[(;] ?default\b/g) ?? []).length > 1);
    assert.deepEqual(twice, [], 'lines that state a default twice');
    assert.ok(
      options.some((line) => / \(default [^)]+\)/.test(line)),
      'the schema defaults are stated',
    );
  });
}
