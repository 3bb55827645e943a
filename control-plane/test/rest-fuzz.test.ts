/**
 * Fuzz of every REST endpoint, generated from the OpenAPI document the control plane serves:
 * for each operation, requests that are wrong by construction (a property of the wrong type or
 * out of range, an unknown field, a missing required one, a body that is not an object or not
 * JSON, a wrong content type, a huge body, a bad path id, bad query values, and for every
 * map-shaped field (additionalProperties) a key it does not accept: "__proto__", "constructor",
 * "prototype", other names every object inherits, and unknown names). Every answer must
 * be a 4xx with a coded JSON error naming what was wrong, never a 5xx; and nothing changes:
 * the traffic split and override (read from Unleash and Redis), parallelism, the audit log and
 * the profiles read the same before and after.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import fc from 'fast-check';
import { eventually, type Stack, startStack } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  anyOf?: JsonSchema[];
  pattern?: string;
  enum?: unknown[];
  additionalProperties?: JsonSchema | boolean;
  propertyNames?: JsonSchema;
};
interface Operation {
  method: string;
  path: string;
  body: JsonSchema | undefined;
  parameters: { name: string; in: 'path' | 'query'; schema: JsonSchema }[];
}

interface BadRequest {
  label: string;
  path: string;
  contentType?: string;
  body?: string;
  /** The field the 400 must name (when the request is wrong in one known place). */
  expectField?: string;
}

interface BadBody {
  label: string;
  body: string;
  expectField?: string;
}

const jsonTypeOf = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : Number.isInteger(value) ? 'integer' : typeof value);

/** The JSON types a schema accepts ("number" accepts integers too). */
function acceptedTypes(schema: JsonSchema): Set<string> {
  const types = new Set<string>();
  for (const part of schema.anyOf ?? [schema]) for (const type of [part.type ?? []].flat()) types.add(type);
  if (types.has('number')) types.add('integer');
  return types;
}

/** A value whose JSON type the schema does not accept. */
const wrongTypeFor = (schema: JsonSchema) => fc.jsonValue({ maxDepth: 2 }).filter((value) => !acceptedTypes(schema).has(jsonTypeOf(value)));

const nonJsonText = fc.string({ minLength: 1, maxLength: 40 }).filter((text) => {
  try {
    JSON.parse(text);
    return false;
  } catch {
    return true;
  }
});

/** A value the schema accepts (for the values of a map whose key is the thing under test). */
function validValueFor(schema: JsonSchema): fc.Arbitrary<unknown> {
  const parts = (schema.anyOf ?? [schema]).flatMap((part) => [part.type ?? []].flat().map((type) => ({ ...part, type })));
  const values = parts.flatMap((part): fc.Arbitrary<unknown>[] => {
    if (part.enum) return [fc.constantFrom(...part.enum)];
    switch (part.type) {
      case 'integer':
        return [fc.integer({ min: part.minimum ?? -1e6, max: part.maximum ?? 1e6 })];
      case 'number':
        return [fc.double({ min: part.minimum ?? -1e6, max: part.maximum ?? 1e6, noNaN: true })];
      case 'null':
        return [fc.constant(null)];
      case 'boolean':
        return [fc.boolean()];
      case 'string':
        return [fc.string({ maxLength: part.maxLength ?? 20 })];
      default:
        return [];
    }
  });
  assert.ok(values.length > 0, `no valid value for ${JSON.stringify(schema)}`);
  return fc.oneof(...values);
}

/** Keys JSON.parse makes own keys of but a plain object already has (or treats specially). */
const prototypeKeys = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__', 'isPrototypeOf'];

/** Every map-shaped field (an object with additionalProperties) in a body schema, with its path. */
function mapFields(schema: JsonSchema | undefined, path: string[] = []): { path: string[]; schema: JsonSchema }[] {
  if (!schema) return [];
  const here = typeof schema.additionalProperties === 'object' ? [{ path, schema }] : [];
  return [...here, ...Object.entries(schema.properties ?? {}).flatMap(([name, property]) => mapFields(property, [...path, name]))];
}

/** JSON text written by hand, so that a "__proto__" key is sent as a key (an object literal would set a prototype). */
const jsonObjectText = (entries: [string, string][]) => `{${entries.map(([key, valueText]) => `${JSON.stringify(key)}:${valueText}`).join(',')}}`;

/**
 * For each map-shaped field: an otherwise valid map with one key it does not accept, placed
 * among accepted entries. The 400 must name that key's field, and nothing of the map applies.
 */
function badMapKeys(schema: JsonSchema | undefined): fc.Arbitrary<BadBody>[] {
  return mapFields(schema)
    .filter((field) => field.path.length > 0)
    .map(({ path, schema: map }) => {
      const valueSchema = map.additionalProperties as JsonSchema;
      const accepted = (map.propertyNames?.enum ?? []).map(String);
      // "__proto__" often: it is the one a plain-object copy loses without a trace.
      const badKey = fc.oneof(
        { arbitrary: fc.constant('__proto__'), weight: 2 },
        { arbitrary: fc.constantFrom(...prototypeKeys), weight: 2 },
        { arbitrary: fc.string({ minLength: 1, maxLength: 20 }).filter((key) => !accepted.includes(key)), weight: 1 },
      );
      const goodEntries =
        accepted.length > 0
          ? fc.uniqueArray(fc.tuple(fc.constantFrom(...accepted), validValueFor(valueSchema)), { selector: ([key]) => key, maxLength: accepted.length })
          : fc.constant([]);
      return fc.tuple(badKey, validValueFor(valueSchema), goodEntries, fc.nat()).map(([key, value, good, at]) => {
        const entries: [string, string][] = good.map(([name, v]) => [name, JSON.stringify(v)]);
        entries.splice(at % (entries.length + 1), 0, [key, JSON.stringify(value)]);
        // Wrap the map in the fields that lead to it.
        const body = path.reduceRight((inner, name) => jsonObjectText([[name, inner]]), jsonObjectText(entries));
        return { label: `map key ${JSON.stringify(key)} in ${path.join('.')}`, body, expectField: ['body', ...path, key].join('.') };
      });
    });
}

/** Bodies that no schema of ours accepts, each with a label saying why. */
function badBodies(schema: JsonSchema | undefined): fc.Arbitrary<BadBody> {
  const properties = Object.entries(schema?.properties ?? {});
  const known = new Set(properties.map(([name]) => name));
  const choices: (fc.Arbitrary<BadBody> | fc.WeightedArbitrary<BadBody>)[] = [
    ...badMapKeys(schema).map((arbitrary) => ({ arbitrary, weight: 4 })),
    fc
      .constantFrom(...prototypeKeys.filter((name) => !known.has(name)))
      .map((name) => ({ label: `field ${JSON.stringify(name)}`, body: jsonObjectText([[name, '{"a":1}']]), expectField: `body.${name}` })),
    fc
      .string({ minLength: 1, maxLength: 20 })
      .filter((name) => !known.has(name) && name !== '__proto__')
      .chain((name) =>
        fc.jsonValue({ maxDepth: 1 }).map((value) => ({ label: `unknown field ${JSON.stringify(name)}`, body: JSON.stringify({ [name]: value }) })),
      ),
    fc
      .oneof(fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string(), fc.boolean())
      .map((value) => ({ label: `a ${jsonTypeOf(value)} body`, body: JSON.stringify(value) })),
    nonJsonText.map((text) => ({ label: `not JSON: ${JSON.stringify(text)}`, body: text })),
  ];
  for (const [name, property] of properties) {
    choices.push(wrongTypeFor(property).map((value) => ({ label: `${name} of type ${jsonTypeOf(value)}`, body: JSON.stringify({ [name]: value }) })));
    if (property.minimum !== undefined || property.maximum !== undefined) {
      const outOfRange = fc.oneof(
        ...(property.minimum !== undefined ? [fc.integer({ min: -1e9, max: property.minimum - 1 })] : []),
        ...(property.maximum !== undefined ? [fc.integer({ min: property.maximum + 1, max: 1e12 })] : []),
        fc.double({ min: property.minimum ?? -1e6, max: property.maximum ?? 1e6, noNaN: true }).filter((n) => !Number.isInteger(n)),
      );
      choices.push(outOfRange.map((value) => ({ label: `${name} = ${value}`, body: JSON.stringify({ [name]: value }) })));
    }
    if (property.maxLength !== undefined)
      choices.push(fc.constant({ label: `${name} too long`, body: JSON.stringify({ [name]: 'x'.repeat(property.maxLength + 1) }) }));
  }
  if ((schema?.required ?? []).length > 0) choices.push(fc.constant({ label: `no ${schema!.required!.join(', ')}`, body: '{}' }));
  return fc.oneof(...choices);
}

function operationsOf(document: {
  paths: Record<string, Record<string, { requestBody?: { content: Record<string, { schema: JsonSchema }> }; parameters?: Operation['parameters'] }>>;
}): Operation[] {
  return Object.entries(document.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({
      method: method.toUpperCase(),
      path,
      body: op.requestBody?.content['application/json']?.schema,
      parameters: op.parameters ?? [],
    })),
  );
}

/** Bad requests for one operation: its body (changes) and its path and query parameters. */
function badRequests(operation: Operation): fc.Arbitrary<BadRequest> {
  const goodPath = operation.path.replace(/\{(\w+)\}/g, (_, name: string) =>
    name === 'workerId'
      ? 'no-such-worker'
      : name === 'rolloutId'
        ? 'ro-0000000000'
        : name === 'cluster'
          ? 'baseline'
          : name === 'integration'
            ? 'bank-a'
            : '1700000000000-0000abcd',
  );
  const choices: fc.Arbitrary<BadRequest>[] = [];
  if (operation.method !== 'GET') {
    choices.push(badBodies(operation.body).map((bad) => ({ ...bad, path: goodPath, contentType: 'application/json' })));
    // A body the schema would accept, sent as something other than JSON.
    choices.push(
      fc
        .constantFrom('text/plain', 'application/x-www-form-urlencoded', 'application/xml')
        .map((type) => ({ label: `content type ${type}`, path: goodPath, contentType: type, body: '{"defaultPercent":50}' })),
    );
  }
  for (const parameter of operation.parameters.filter((p) => p.in === 'path')) {
    const badId = fc
      .string({ minLength: 0, maxLength: 300 })
      .filter((id) => !new RegExp(parameter.schema.pattern ?? '^$').test(id) && !id.includes('/') && id !== '.' && id !== '..');
    choices.push(
      badId.map((id) => ({
        label: `${parameter.name} ${JSON.stringify(id)}`,
        path: operation.path.replace(`{${parameter.name}}`, encodeURIComponent(id)),
        ...(operation.method === 'GET' ? {} : { contentType: 'application/json', body: '{}' }),
      })),
    );
  }
  const query = operation.parameters.filter((p) => p.in === 'query');
  if (query.length > 0) {
    const badValue = fc.oneof(fc.string({ maxLength: 30 }), fc.integer().map(String), fc.double().map(String), fc.constant('1'.repeat(400)));
    choices.push(
      fc
        .tuple(fc.constantFrom(...query.map((p) => p.name)), badValue)
        .map(([name, value]) => ({ label: `query ${name}=${JSON.stringify(value)}`, path: `${goodPath}?${new URLSearchParams({ [name]: value })}` })),
      fc
        .string({ minLength: 1, maxLength: 10 })
        .filter((name) => !query.some((p) => p.name === name))
        .map((name) => ({ label: `unknown query ${JSON.stringify(name)}`, path: `${goodPath}?${new URLSearchParams({ [name]: '1' })}` })),
    );
  }
  return choices.length > 0 ? fc.oneof(...choices) : fc.constant({ label: 'unknown query parameter', path: `${goodPath}?frobnicate=1` });
}

/** What must not change: read through the API (the split and parallelism come from Unleash). */
async function observable(stack: Stack) {
  const [traffic, parallelism, audit, profiles] = await Promise.all(
    ['/traffic', '/parallelism', '/audit?limit=1000', '/profiles', '/limits'].map((path) => stack.api('GET', path)),
  );
  const { balancers: _balancers, ...split } = traffic!.body;
  return { split, parallelism: parallelism!.body, auditEntries: audit!.body.entries.length, profiles: profiles!.body };
}

test(
  'fuzz: every endpoint from the OpenAPI document answers bad requests with a coded 4xx naming the problem, never a 5xx, and nothing changes',
  { timeout: 240_000 },
  async (t) => {
    const stack = await startStack(t, unleash, { maxBodyBytes: 4096 });
    await stack.fleet.addWorker({ cluster: 'baseline', workerId: 'fuzz-worker', maxParallelism: 2 });
    await stack.fleet.addBalancer();
    // A state worth keeping: a split, a parallelism, one integration rolled back.
    assert.equal((await stack.api('PUT', '/traffic', { defaultPercent: 20, integrations: { 'bank-a': 40 } })).status, 200);
    assert.equal((await stack.api('PUT', '/parallelism', { clusters: { candidate: 8 } })).status, 200);
    assert.equal((await stack.api('POST', '/rollback', { integration: 'bank-b' })).status, 200);
    // The rollback reaches Unleash after its answer: let it settle before taking the state.
    await eventually('the changes are in Unleash', 10_000, async () => ((await stack.api('GET', '/traffic')).body.unleashWritesPending ? undefined : true));
    const beforeState = await observable(stack);

    const document = (await stack.api('GET', '/openapi.json', undefined, null)).body;
    // Operations that take input; /events streams forever and takes none.
    const operations = operationsOf(document).filter((op) => op.method !== 'GET' || op.parameters.length > 0);
    assert.ok(operations.length >= 10, `operations found: ${operations.map((op) => `${op.method} ${op.path}`).join(', ')}`);
    const statuses: Record<string, number> = {};
    for (const operation of operations) {
      await fc.assert(
        fc.asyncProperty(badRequests(operation), async (request) => {
          const response = await fetch(`${stack.controlPlane.url}/api/v1${request.path}`, {
            method: operation.method,
            headers: { authorization: 'Bearer operator-token-0123456789abcdef', ...(request.contentType ? { 'content-type': request.contentType } : {}) },
            ...(request.body === undefined ? {} : { body: request.body }),
            signal: AbortSignal.timeout(10_000),
          });
          const text = await response.text();
          const where = `${operation.method} ${request.path} (${request.label}) → ${response.status} ${text.slice(0, 300)}`;
          statuses[response.status] = (statuses[response.status] ?? 0) + 1;
          assert.ok(response.status < 500, where);
          // A GET with wrong query values may still be a valid read (a value inside the range).
          if (operation.method === 'GET' && response.status === 200) return;
          assert.ok([400, 404, 413, 415].includes(response.status), where);
          const error = (JSON.parse(text) as { error: { code: string; message: string; fields?: { field: string; message: string }[] } }).error;
          assert.match(error.code, /^HR_ERR_[A-Z_]+$/, where);
          assert.ok(error.message.length > 0, where);
          if (response.status === 400)
            assert.ok(
              error.fields && error.fields.length > 0 && error.fields.every((f) => f.field.length > 0 && f.message.length > 0),
              `400 without the fields: ${where}`,
            );
          if (request.expectField) {
            assert.equal(response.status, 400, where);
            assert.ok(
              error.fields!.some((f) => f.field === request.expectField),
              `the fields name ${request.expectField}: ${where}`,
            );
          }
        }),
        { numRuns: operation.method === 'GET' ? 15 : mapFields(operation.body).length > 0 ? 80 : 40, includeErrorInReport: true },
      );
    }
    // A body over maxBodyBytes, on every change.
    for (const operation of operations.filter((op) => op.method !== 'GET')) {
      const path = operation.path.replace(/\{(\w+)\}/g, 'x');
      const huge = await stack.api(operation.method, path, JSON.stringify({ reason: 'y'.repeat(8000) }));
      assert.equal(huge.status, 413, `${operation.method} ${path}: ${JSON.stringify(huge.body)}`);
      assert.equal(huge.body.error.code, 'HR_ERR_BODY_TOO_LARGE');
    }
    t.diagnostic(`answers by status over ${operations.length} operations: ${JSON.stringify(statuses)}`);
    // The generators found the map-shaped fields (a schema change that hid them would make this fuzz blind to the class).
    const mapped = operations.flatMap((op) =>
      mapFields(op.body)
        .filter((field) => field.path.length > 0)
        .map((field) => `${op.method} ${op.path} ${field.path.join('.')}`),
    );
    assert.deepEqual(mapped.sort(), ['PUT /parallelism clusters', 'PUT /traffic integrations']);
    assert.deepEqual(await observable(stack), beforeState, 'bad requests changed nothing');
  },
);
