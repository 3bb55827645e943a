/**
 * The handlers a worker is given are checked before it starts: a module that exports no
 * handler, or an entry that is not a function, would start a worker that takes tasks it cannot
 * run. The library refuses them with a ConfigError naming the entry; the CLI exits 2.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ConfigError } from '@headroom/common';
import { testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { checkHandlers } from '../src/handler';

test('checkHandlers: an object of functions passes; empty, not an object, or an entry that is not a function is refused naming it', () => {
  const handlers = { acme: async () => 'ok', '*': async () => undefined };
  assert.equal(checkHandlers(handlers, 'module m'), handlers);
  const refused: [unknown, RegExp][] = [
    [{}, /handlers: module m exports an empty `handlers` object: the worker would serve no integration/],
    [undefined, /handlers: module m exports no `handlers` object \(got undefined\)/],
    [[async () => 'ok'], /got an array/],
    [{ good: async () => 'ok', acme: 'not a function' }, /handlers\.acme: module m gives string, expected a function/],
    [{ acme: null }, /handlers\.acme: module m gives null/],
  ];
  for (const [value, message] of refused) {
    assert.throws(
      () => checkHandlers(value, 'module m'),
      (error: unknown) => error instanceof ConfigError && message.test(error.message),
      JSON.stringify(value),
    );
  }
});

test('the worker CLI exits 2 at start for a handlers module that is missing, fails to load, exports none or has an entry that is not a function, naming --handlers or the entry', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-handlers-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const cli = path.join(__dirname, '..', 'src', 'cli.js');
  const run = (source: string) => {
    const file = path.join(dir, `handlers-${Math.random().toString(36).slice(2)}.js`);
    fs.writeFileSync(file, source);
    return spawnSync(process.execPath, [cli, '--cluster', 'c', '--handlers', file, '--key-prefix', uniquePrefix('handlers-cli'), '--redis-url', testRedisUrl], {
      env: { ...process.env, LOG_LEVEL: 'warn' },
      encoding: 'utf8',
      timeout: 20_000,
    });
  };
  let result = run('exports.handlers = { echo: async (task) => task.payload, acme: "not a function" };\n');
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /handlers\.acme: module .* gives string, expected a function/);
  result = run('exports.handlers = {};\n');
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /exports an empty `handlers` object/);
  // A module that fails to load, or that is not there: exit 2 naming the flag, not Node's own error.
  result = run("require('a-package-nobody-installed');\n");
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--handlers: module .*handlers-\w+\.js failed to load: Cannot find module 'a-package-nobody-installed'/);
  const missing = path.join(dir, 'not-there.js');
  result = spawnSync(process.execPath, [cli, '--cluster', 'c', '--handlers', missing, '--redis-url', testRedisUrl], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(result.status, 2, result.stderr);
  assert.match(result.stderr, /--handlers: no module at .*not-there\.js/);
});
