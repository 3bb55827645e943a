import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { z } from 'zod';
import { ConfigError, readOptions, settings, usageText, type OptionSpec } from '../src/index';

const specs: readonly OptionSpec[] = [
  { key: 'acceptUnaddressed', flag: 'accept-unaddressed', env: 'X_ACCEPT', isSwitch: true, description: 'a switch' },
  { key: 'port', flag: 'port', env: 'X_PORT', valueName: 'PORT', description: 'a value' },
];
const schema = z.object({ acceptUnaddressed: settings.switch().default(false), port: settings.nonNegativeInt().default(0) }).strict();
const read = (argv: string[], env: NodeJS.ProcessEnv = {}) => {
  const parsed = readOptions(schema, specs, argv, env);
  assert.equal(parsed.help, false);
  return parsed.help ? undefined : parsed.config;
};

test('a switch is on with its flag alone, from its env as true/false/1/0, off by default', () => {
  assert.equal(read([])?.acceptUnaddressed, false);
  assert.equal(read(['--accept-unaddressed'])?.acceptUnaddressed, true);
  assert.equal(read([], { X_ACCEPT: 'true' })?.acceptUnaddressed, true);
  assert.equal(read([], { X_ACCEPT: '1' })?.acceptUnaddressed, true);
  assert.equal(read([], { X_ACCEPT: 'false' })?.acceptUnaddressed, false);
  assert.equal(read(['--accept-unaddressed'], { X_ACCEPT: 'false' })?.acceptUnaddressed, true, 'the flag wins over env');
  assert.throws(() => read([], { X_ACCEPT: 'yes' }), (error: unknown) => error instanceof ConfigError && /X_ACCEPT \(env\): got "yes", expected true or false/.test(error.message));
  assert.match(usageText('Usage: x', specs), /^ {2}--accept-unaddressed {2,}a switch \(env X_ACCEPT\)$/m);
  assert.match(usageText('Usage: x', specs), /^ {2}--port PORT {2,}a value/m);
});
