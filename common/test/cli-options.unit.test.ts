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
  assert.throws(
    () => read([], { X_ACCEPT: 'yes' }),
    (error: unknown) => error instanceof ConfigError && /X_ACCEPT \(env\): got "yes", expected true or false/.test(error.message),
  );
  assert.match(usageText('Usage: x', specs, schema), /^ {2}--accept-unaddressed {2,}a switch \(default false\) \(env X_ACCEPT\)$/m);
  assert.match(usageText('Usage: x', specs, schema), /^ {2}--port PORT {2,}a value \(default 0\) \(env X_PORT\)$/m);
});

test('the usage text states each default as the schema has it, and none where it has none', () => {
  const withDefaults = z
    .object({
      name: z.string().default('hr'),
      count: z.number().default(3),
      shape: z.object({ a: z.number() }).default({ a: 1 }),
      token: z.string().optional(),
    })
    .strict();
  const described: OptionSpec[] = ['name', 'count', 'shape', 'token'].map((key) => ({ key, flag: key, valueName: 'V', description: `the ${key}` }));
  const text = usageText('Usage: y', described, withDefaults);
  assert.match(text, /--name V {2,}the name \(default hr\)$/m);
  assert.match(text, /--count V {2,}the count \(default 3\)$/m);
  assert.match(text, /--shape V {2,}the shape \(default \{"a":1\}\)$/m);
  assert.match(text, /--token V {2,}the token$/m);
});
