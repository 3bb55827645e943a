import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { burnCpuForProfileTest, eventually, operatorToken, type Stack, startStack, submit, task, viewerToken } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

const profileDone = (stack: Stack, profileId: string) =>
  eventually(`profile ${profileId} finished`, 20_000, async () => {
    const response = await stack.api('GET', `/profiles/${profileId}`, undefined, viewerToken);
    return response.body.status === 'running' ? undefined : response.body;
  });

// The longest test runs last: Unleash, stopped right after a stack created its flags, can fail
// on the queries those flags set off (an unhandled rejection inside unleash-server).
test('bad requests: 400 naming the field, 404 for an unknown worker or profile, 403 for a viewer; nothing starts', async (t) => {
  const stack = await startStack(t, unleash);
  const worker = await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  for (const [body, field, message] of [
    [{ workerId: worker.workerId, durationMs: 99 }, 'body.durationMs', /from 100 to 60000/],
    [{ workerId: worker.workerId, durationMs: 60_001 }, 'body.durationMs', /from 100 to 60000/],
    [{ workerId: worker.workerId, durationMs: 1.5 }, 'body.durationMs', /whole number/],
    [{ workerId: worker.workerId, durationMs: '1000' }, 'body.durationMs', /whole number/],
    [{ workerId: worker.workerId, durationMs: 1000, sampleRate: 1 }, 'body.sampleRate', /unknown field; accepted: workerId, durationMs/],
    [{ durationMs: 1000 }, 'body.workerId', /required/],
    [{ workerId: 'no spaces', durationMs: 1000 }, 'body.workerId', /expected 1-128 characters/],
  ] as const) {
    const response = await stack.api('POST', '/profiles', body);
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal(response.body.error.code, 'HR_ERR_INVALID_REQUEST');
    const problem = response.body.error.fields.find((f: { field: string }) => f.field === field);
    assert.ok(problem, `${field} named: ${JSON.stringify(response.body.error.fields)}`);
    assert.match(problem.message, message);
  }
  const unknown = await stack.api('POST', '/profiles', { workerId: 'no-such-worker', durationMs: 1000 });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.error.code, 'HR_ERR_NOT_FOUND');
  const viewer = await stack.api('POST', '/profiles', { workerId: worker.workerId, durationMs: 1000 }, viewerToken);
  assert.equal(viewer.status, 403);
  assert.equal(viewer.body.error.code, 'HR_ERR_FORBIDDEN');
  assert.equal((await stack.api('POST', '/profiles', { workerId: worker.workerId }, null)).status, 401);
  assert.equal((await stack.api('GET', '/profiles', undefined, null)).status, 401);

  assert.equal((await stack.api('GET', '/profiles/not-an-id')).body.error.fields[0].field, 'path.profileId');
  assert.equal((await stack.api('GET', '/profiles/1700000000000-0a1b2c3d')).status, 404);
  assert.equal((await stack.api('GET', '/profiles/1700000000000-0a1b2c3d/cpuprofile', undefined, operatorToken)).status, 404);
  assert.equal((await stack.api('GET', '/profiles?limit=0')).status, 400);
  assert.deepEqual((await stack.api('GET', '/profiles', undefined, viewerToken)).body, { profiles: [] });
  assert.deepEqual(
    (await stack.api('GET', '/audit')).body.entries.filter((e: { action: string }) => e.action === 'profile.start'),
    [],
  );

  // The default duration (10 s) applies when none is given; the lock still guards the fleet.
  const started = await stack.api('POST', '/profiles', { workerId: worker.workerId });
  assert.equal(started.status, 202);
  assert.equal(started.body.durationMs, 10_000);
  const openapi = await stack.api('GET', '/openapi.json', undefined, null);
  assert.ok(openapi.body.paths['/profiles'].post && openapi.body.paths['/profiles/{profileId}/cpuprofile'].get);
});

test('a worker that stops mid-profile (drain): the profile fails with its code, and the lock is free again', async (t) => {
  const stack = await startStack(t, unleash);
  const leaving = await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 1 });
  const staying = await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  const started = await stack.api('POST', '/profiles', { workerId: leaving.workerId, durationMs: 30_000 });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  await new Promise((resolve) => setTimeout(resolve, 200));
  await leaving.close();
  const failed = await profileDone(stack, started.body.profileId);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error.code, 'HR_ERR_WORKER_STOPPED', JSON.stringify(failed.error));
  const next = await stack.api('POST', '/profiles', { workerId: staying.workerId, durationMs: 100 });
  assert.equal(next.status, 202, JSON.stringify(next.body));
  assert.equal((await profileDone(stack, next.body.profileId)).status, 'done');
});

test('POST /profiles profiles one worker at a time; the summary finds its CPU-heavy handler; the .cpuprofile downloads', async (t) => {
  const stack = await startStack(t, unleash);
  const hot = await stack.fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 }, { '*': burnCpuForProfileTest });
  const other = await stack.fleet.addWorker({ cluster: 'candidate', maxParallelism: 1 });
  await stack.fleet.addBalancer();
  const client = stack.fleet.clients[0]!;

  // Tasks for the hot worker, two at a time, until the profile is done (and never more than 500).
  let loading = true;
  let submitted = 0;
  const load = Promise.all(
    [0, 1].map(async () => {
      while (loading && submitted < 500) {
        submitted++;
        const result = await submit(client, task({ integration: 'bank-a' }));
        assert.ok(result.ok, JSON.stringify(result));
      }
    }),
  );
  t.after(() => (loading = false));

  const started = await stack.api('POST', '/profiles', { workerId: hot.workerId, durationMs: 2000 });
  assert.equal(started.status, 202, JSON.stringify(started.body));
  assert.equal(started.body.status, 'running');
  assert.equal(started.body.workerId, hot.workerId);
  assert.equal(started.body.cluster, 'baseline');
  const profileId: string = started.body.profileId;

  // Another worker meanwhile: 409, naming who holds the lock and until when; nothing is started.
  const meanwhile = await stack.api('POST', '/profiles', { workerId: other.workerId, durationMs: 500 });
  assert.equal(meanwhile.status, 409, JSON.stringify(meanwhile.body));
  assert.equal(meanwhile.body.error.code, 'HR_ERR_PROFILE_LOCKED');
  assert.match(meanwhile.body.error.message, new RegExp(`worker ${hot.workerId} is being profiled \\(profile ${profileId}, asked by olga\\) until \\d{4}-`));
  assert.ok(meanwhile.body.error.retryAfterMs > 0);
  assert.equal((await stack.api('GET', `/profiles/${profileId}/cpuprofile`)).status, 404, 'nothing to download while it runs');

  const done = await profileDone(stack, profileId);
  loading = false;
  await load;
  assert.equal(done.status, 'done', JSON.stringify(done.error));
  assert.ok(submitted > 20, `tasks ran while profiling (${submitted})`);
  const top = done.summary.topFunctions as { functionName: string; location: string; selfMs: number; share: number }[];
  const rank = top.findIndex((f) => f.functionName === 'burnCpuForProfileTest');
  assert.ok(rank >= 0 && rank < 3, `burnCpuForProfileTest among the top 3: ${JSON.stringify(top.slice(0, 5))}`);
  assert.match(top[rank]!.location, /testkit\/dist\/src\/cpu-burn\.js:\d+$/);
  assert.ok(top[rank]!.selfMs > 300 && top[rank]!.share > 0.15, JSON.stringify(top[rank]));
  assert.ok(done.summary.profiledMs >= 1900, `profiled ${done.summary.profiledMs} ms`);

  // The download is a .cpuprofile DevTools and speedscope open.
  const download = await stack.client.withToken(viewerToken).send({ method: 'GET', path: `/profiles/${profileId}/cpuprofile` });
  assert.equal(download.status, 200);
  assert.match(download.headers.get('content-type') ?? '', /^application\/json/);
  assert.match(download.headers.get('content-disposition') ?? '', new RegExp(`^attachment; filename="${hot.workerId}-\\d{8}T\\d{6}Z\\.cpuprofile"$`));
  const cpuprofile = download.body as {
    nodes: { id: number; callFrame: { functionName: string } }[];
    samples: number[];
    timeDeltas: number[];
    startTime: number;
    endTime: number;
  };
  assert.equal(cpuprofile.samples.length, cpuprofile.timeDeltas.length);
  assert.ok(cpuprofile.endTime > cpuprofile.startTime);
  const burnNodes = new Set(cpuprofile.nodes.filter((n) => n.callFrame.functionName === 'burnCpuForProfileTest').map((n) => n.id));
  assert.ok(cpuprofile.samples.filter((id) => burnNodes.has(id)).length > 100, 'samples land in the handler');
  assert.equal(Number(download.headers.get('content-length')), done.cpuprofileBytes);

  const listed = await stack.api('GET', '/profiles', undefined, viewerToken);
  assert.deepEqual(
    listed.body.profiles.map((p: { profileId: string }) => p.profileId),
    [profileId],
  );
  const audit = (await stack.api('GET', '/audit')).body.entries.filter((e: { action: string }) => e.action === 'profile.start');
  assert.deepEqual(
    audit.map((e: { actor: string; target: string; after: { profileId: string } }) => [e.actor, e.target, e.after.profileId]),
    [['olga', hot.workerId, profileId]],
  );

  // The lock was released: another worker can be profiled now, and the newest is listed first.
  const next = await stack.api('POST', '/profiles', { workerId: other.workerId, durationMs: 200 });
  assert.equal(next.status, 202, JSON.stringify(next.body));
  assert.equal((await profileDone(stack, next.body.profileId)).status, 'done');
  assert.deepEqual(
    (await stack.api('GET', '/profiles?limit=1')).body.profiles.map((p: { profileId: string }) => p.profileId),
    [next.body.profileId],
  );
});
