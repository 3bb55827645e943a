/**
 * Body maps keyed by user input (PUT /traffic integrations, PUT /parallelism clusters) reject
 * every key they do not accept, "__proto__" and its kind included, as a whole: a 400 naming the
 * key, and nothing changes (Unleash, the audit log). The bodies are raw JSON text: an object
 * literal `{ __proto__: ... }` in this file would set a prototype, not send the key.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { startStack, type Stack } from '@headroom/testkit';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

async function observable(stack: Stack) {
  const [traffic, parallelism, audit] = await Promise.all(['/traffic', '/parallelism', '/audit?limit=1000'].map((path) => stack.api('GET', path)));
  const { balancers: _balancers, ...split } = traffic!.body;
  return { split, parallelism: parallelism!.body, audit: audit!.body.entries };
}

const cases: { path: string; body: string; field: string; accepted: string }[] = [
  { path: '/traffic', body: '{"integrations":{"__proto__":{"polluted":1}}}', field: 'body.integrations.__proto__', accepted: 'accepted: bank-a, bank-b' },
  { path: '/traffic', body: '{"integrations":{"__proto__":"x","bank-a":5}}', field: 'body.integrations.__proto__', accepted: 'accepted: bank-a, bank-b' },
  {
    path: '/traffic',
    body: '{"defaultPercent":30,"integrations":{"bank-b":7,"constructor":5}}',
    field: 'body.integrations.constructor',
    accepted: 'accepted: bank-a, bank-b',
  },
  { path: '/traffic', body: '{"integrations":{"prototype":5}}', field: 'body.integrations.prototype', accepted: 'accepted: bank-a, bank-b' },
  { path: '/parallelism', body: '{"clusters":{"__proto__":{"a":1}}}', field: 'body.clusters.__proto__', accepted: 'accepted: baseline, candidate' },
  {
    path: '/parallelism',
    body: '{"clusters":{"candidate":3,"__proto__":{"candidate":4}}}',
    field: 'body.clusters.__proto__',
    accepted: 'accepted: baseline, candidate',
  },
  {
    path: '/parallelism',
    body: '{"clusters":{"baseline":3,"hasOwnProperty":4}}',
    field: 'body.clusters.hasOwnProperty',
    accepted: 'accepted: baseline, candidate',
  },
];

test('the test bodies really carry an own "__proto__" key once parsed (as express.json parses them)', () => {
  for (const { body, field } of cases) {
    const map = Object.values(JSON.parse(body) as Record<string, object>).find((value) => typeof value === 'object') as object;
    const key = field.split('.').at(-1)!;
    assert.ok(Object.hasOwn(map, key), `${body} has an own ${key}`);
    assert.equal(Object.getPrototypeOf(map), Object.prototype, `${body}: JSON.parse set no prototype`);
  }
});

test('PUT /traffic and PUT /parallelism reject "__proto__", "constructor" and other unaccepted map keys with a 400 naming the key, and change nothing', async (t) => {
  const stack = await startStack(t, unleash);
  // A state worth keeping, so that a partly applied body would show.
  assert.equal((await stack.api('PUT', '/traffic', { defaultPercent: 20, integrations: { 'bank-a': 40 } })).status, 200);
  assert.equal((await stack.api('PUT', '/parallelism', { clusters: { candidate: 8 } })).status, 200);
  const beforeState = await observable(stack);

  for (const { path, body, field, accepted } of cases) {
    const answer = await stack.api('PUT', path, body);
    const where = `PUT ${path} ${body} → ${answer.status} ${JSON.stringify(answer.body)}`;
    assert.equal(answer.status, 400, where);
    assert.equal(answer.body.error.code, 'HR_ERR_INVALID_REQUEST', where);
    const problem = (answer.body.error.fields as { field: string; message: string }[]).find((f) => f.field === field);
    assert.ok(problem, `the fields name ${field}: ${where}`);
    assert.ok(problem.message.includes(accepted), `the message says what is accepted: ${where}`);
  }

  const afterState = await observable(stack);
  assert.deepEqual(afterState, beforeState, 'nothing changed: split, parallelism and audit log read the same');
  assert.equal(Object.getPrototypeOf({}), Object.prototype);
  assert.equal(({} as { polluted?: unknown }).polluted, undefined, 'no prototype was polluted');
});
