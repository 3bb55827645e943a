import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { z } from 'zod';
import { parseConfig, settings, userKeyedMap } from '../src/index';

const percent = z.number().int().min(0).max(100);

// Raw JSON text throughout: JSON.parse makes "__proto__" an own key, as a request or config file does.
test('userKeyedMap rejects forbidden and unaccepted keys of the raw input, as a whole, at the key', () => {
  const map = userKeyedMap(percent, { what: 'integration', accepted: ['bank-a', 'bank-b'] });
  for (const key of ['__proto__', 'constructor', 'prototype', 'toString', 'bank-c']) {
    const result = map.safeParse(JSON.parse(`{"bank-a": 5, ${JSON.stringify(key)}: 1}`));
    assert.ok(!result.success, key);
    assert.deepEqual(
      result.error.issues.map((issue) => issue.path),
      [[key]],
      key,
    );
    assert.match(result.error.issues[0]!.message, /accepted: bank-a, bank-b$/);
  }
  assert.deepEqual(map.parse(JSON.parse('{"bank-a": 5}')), { 'bank-a': 5 });
  assert.equal(map.safeParse(JSON.parse('{"bank-a": 500}')).error?.issues[0]?.path[0], 'bank-a');
  assert.equal(map.safeParse([]).success, false);
});

test('userKeyedMap with a key schema: a config map of names refuses "__proto__" with the setting named', () => {
  const schema = z.object({ byIntegration: userKeyedMap(percent, { what: 'integration', key: settings.name() }) }).strict();
  assert.throws(
    () => parseConfig('test options', schema, JSON.parse('{"byIntegration": {"__proto__": 5, "bank-a": 10}}')),
    /byIntegration\.__proto__: got 5, reserved name, not an integration/,
  );
  assert.throws(
    () => parseConfig('test options', schema, JSON.parse('{"byIntegration": {"Bank A": 5}}')),
    /byIntegration\.Bank A: got 5, expected 1-64 characters/,
  );
  assert.deepEqual(parseConfig('test options', schema, JSON.parse('{"byIntegration": {"bank-a": 10}}')).byIntegration, { 'bank-a': 10 });
});
