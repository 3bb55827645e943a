/**
 * @headroom/testkit's ControlPlaneApi (the client the tests, benchmarks, fault suite and demo
 * share) against a real control plane: typed answers, and each failure as a coded
 * ControlPlaneApiError (the API's own code and status, or the client's when no answer came).
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import { ControlPlaneApi, ControlPlaneApiError, controlPlaneApiErrorCodes, freePort, startStack, viewerToken } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { apiErrorCodes } from '../src/index';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

/** The error a call rejected with (the test fails if it resolved). */
async function rejection(call: Promise<unknown>): Promise<ControlPlaneApiError> {
  const error = await call.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (error: unknown) => error,
  );
  assert.ok(error instanceof ControlPlaneApiError, String(error));
  return error;
}

test('typed calls answer with the API views; error answers reject with their status, HR_ERR_* code and fields', async (t) => {
  const stack = await startStack(t, unleash);
  const api = stack.client;

  const changed = await api.setTraffic({ defaultPercent: 25, integrations: { 'bank-a': 40 } });
  assert.deepEqual([changed.effectivePercent.default, changed.effectivePercent.integrations['bank-a']], [25, 40]);
  assert.equal((await api.traffic()).flag.integrations['bank-a']?.percent, 40);
  assert.deepEqual(await api.setParallelism({ candidate: 6 }), { baseline: null, candidate: 6 });
  const [entry] = await api.audit({ limit: 1, action: 'parallelism.set' });
  assert.equal(entry?.actor, 'olga');
  assert.deepEqual(await api.withToken(viewerToken).session(), { name: 'victor', role: 'viewer' });
  const readiness = await api.withToken(null).readiness();
  assert.equal(readiness.ready, true, JSON.stringify(readiness));
  assert.match(await api.withToken(null).metrics(), /^# HELP /m);

  const invalid = await rejection(api.setTraffic({ defaultPercent: 101 }));
  assert.equal(invalid.status, 400);
  assert.equal(invalid.code, apiErrorCodes.invalidRequest);
  assert.match(invalid.message, /^PUT \/traffic: HTTP 400 HR_ERR_INVALID_REQUEST: body\.defaultPercent: expected a whole number from 0 to 100/);
  assert.deepEqual(invalid.details.fields, [{ field: 'body.defaultPercent', message: 'expected a whole number from 0 to 100' }]);

  const wrongToken = await rejection(api.withToken('not-a-token-0123456789').traffic());
  assert.deepEqual([wrongToken.status, wrongToken.code], [401, apiErrorCodes.unauthenticated]);
  const noToken = await rejection(api.withToken(null).traffic());
  assert.deepEqual([noToken.status, noToken.code], [401, apiErrorCodes.unauthenticated]);
  const viewerChange = await rejection(api.withToken(viewerToken).rollback({ integration: 'bank-a' }));
  assert.deepEqual([viewerChange.status, viewerChange.code], [403, apiErrorCodes.forbidden]);
  const unknown = await rejection(api.call('GET', '/nothing-here'));
  assert.deepEqual([unknown.status, unknown.code], [404, apiErrorCodes.notFound]);
  // Nothing of the refused changes happened.
  assert.deepEqual((await api.traffic()).effectivePercent, changed.effectivePercent);

  // send() resolves with any answer: the status and the body as sent.
  const answer = await api.send({ method: 'PUT', path: '/traffic', body: '{"defaultPercent":', token: viewerToken });
  assert.equal(answer.status, 403);
  assert.deepEqual((answer.body as { error: { code: string } }).error.code, apiErrorCodes.forbidden);

  // An answer past maxBodyBytes is not read to its end.
  const small = new ControlPlaneApi({ apiUrl: api.apiUrl, token: null, maxBodyBytes: 1024 });
  const tooLarge = await rejection(small.metrics());
  assert.deepEqual([tooLarge.status, tooLarge.code], [undefined, controlPlaneApiErrorCodes.answerTooLarge]);
});

test('no answer: a refused connection and a server that never answers reject with coded errors, within the deadline', async (t) => {
  const refused = await rejection(new ControlPlaneApi({ apiUrl: `http://127.0.0.1:${await freePort()}/api/v1`, token: null }).traffic());
  assert.deepEqual([refused.status, refused.code], [undefined, controlPlaneApiErrorCodes.unreachable]);
  assert.match(refused.message, /ECONNREFUSED/);

  // Accepts connections and never answers.
  const sockets = new Set<net.Socket>();
  const silent = net.createServer((socket) => sockets.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const socket of sockets) socket.destroy();
    silent.close();
  });
  const apiUrl = `http://127.0.0.1:${(silent.address() as net.AddressInfo).port}/api/v1`;
  const startedAtMs = performance.now();
  const timedOut = await rejection(new ControlPlaneApi({ apiUrl, token: null, timeoutMs: 300 }).traffic());
  assert.deepEqual([timedOut.status, timedOut.code], [undefined, controlPlaneApiErrorCodes.timeout]);
  assert.ok(performance.now() - startedAtMs < 5000, `answered after ${performance.now() - startedAtMs} ms`);

  // The caller's own abort comes back as it is.
  const controller = new AbortController();
  const call = new ControlPlaneApi({ apiUrl, token: null }).send({ method: 'GET', path: '/traffic', signal: controller.signal });
  const reason = new Error('the caller gave up');
  controller.abort(reason);
  await assert.rejects(call, (error) => error === reason);
});
