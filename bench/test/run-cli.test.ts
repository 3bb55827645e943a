/**
 * The benchmark runner's command line from the outside: bad input gets exit 2 and a message that
 * names the option and what it accepts, and nothing runs.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { test } from 'node:test';

const runScript = path.join(__dirname, '..', 'src', 'run.js');
const run = (...args: string[]) => spawnSync(process.execPath, [runScript, ...args], { encoding: 'utf8', timeout: 15_000 });

test('--help prints the usage and exits 0', () => {
  const result = run('--help');
  assert.equal(result.status, 0);
  assert.match(result.stdout, /^Usage: node bench\/dist\/src\/run\.js \[overhead \| .* \| soak\]/);
});

test('bad input: exit 2, the option named with what it accepts, and the usage', () => {
  const cases: [string[], RegExp][] = [
    [['soak', '--minutes', '0'], /--minutes: got "0", expected a whole number of minutes from 1 to 1440/],
    [['soak', '--minutes', 'abc'], /--minutes: got "abc", expected a whole number of minutes from 1 to 1440/],
    [['soak', '--minutes=-3'], /--minutes: got "-3", expected a whole number of minutes from 1 to 1440/],
    // A value that looks like an option: parseArgs's own message, not a stack trace.
    [['soak', '--minutes', '-3'], /Option '--minutes' argument is ambiguous/],
    [['soak', '--bogus'], /Unknown option '--bogus'/],
    [['nosuch'], /unknown benchmark nosuch; expected one of: overhead, /],
    [
      ['incidents', '--scenario', 'slow-bank,spike'],
      /--scenario: got "slow-bank,spike", expected one or more of slow-bank, background-spike, high-load, separated by commas/,
    ],
    [['incidents', '--scenario', ''], /--scenario: got "", expected one or more of slow-bank, background-spike, high-load/],
    [['memory', '--scenario', 'high-load'], /--scenario: only the incidents benchmark takes it; name incidents/],
    [['incidents', '--repetitions', '0'], /--repetitions: got "0", expected a whole number from 1 to 10/],
  ];
  for (const [args, message] of cases) {
    const result = run(...args);
    assert.equal(result.status, 2, `${args.join(' ')}: ${result.stderr}`);
    assert.match(result.stderr, message);
    assert.match(result.stderr, /Usage: /);
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(result.stdout, '', 'nothing ran');
  }
});
