import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { BalancerService, channelSecurity, serverTlsFromOptions, workerTlsFromOptions, type BalancerClient } from '@headroom/proto';
import { makeCertificates } from './certificates';
import { startFleet, submit, task } from '@headroom/testkit';

function client(address: string, credentials: grpc.ChannelCredentials, t: TestContext): BalancerClient {
  const balancerClient = new BalancerService(address, credentials);
  t.after(() => balancerClient.close());
  return balancerClient;
}

test('gRPC over mutual TLS: clients to the balancer and the balancer to its workers; plain text and strangers are refused', async (t) => {
  const { file } = makeCertificates(t);
  const serverTls = { certFile: file('server.pem'), keyFile: file('server.key'), clientCaFile: file('ca.pem') };
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline', workerId: 'tls-worker', maxParallelism: 2, tls: serverTls });
  const balancer = await fleet.addBalancer({
    tls: serverTls,
    workerTls: { caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client.key') },
  });

  const trusted = client(
    balancer.address,
    channelSecurity({ caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client.key') }, 'test').credentials,
    t,
  );
  const done = await submit(trusted, task({ integration: 'echo', payload: Buffer.from('over tls') }));
  assert.ok(done.ok && !done.response.error, JSON.stringify(done));
  assert.equal(done.response.result?.toString(), 'over tls');
  assert.equal(done.response.placement?.workerId, 'tls-worker');

  // Plain text, a client without a certificate, one whose certificate another CA signed, and one
  // that does not trust the server's CA: none gets through, and nothing runs.
  const refused = [
    grpc.credentials.createInsecure(),
    channelSecurity({ caFile: file('ca.pem') }, 'test').credentials,
    channelSecurity({ caFile: file('ca.pem'), certFile: file('stranger.pem'), keyFile: file('stranger.key') }, 'test').credentials,
    channelSecurity({ caFile: file('other-ca.pem'), certFile: file('client.pem'), keyFile: file('client.key') }, 'test').credentials,
  ];
  for (const [i, credentials] of refused.entries()) {
    const result = await submit(client(balancer.address, credentials, t), task({ integration: 'echo' }), 3000);
    assert.ok(!result.ok && result.status === grpc.status.UNAVAILABLE, `case ${i}: ${JSON.stringify(result)}`);
  }
  assert.equal(fleet.workers[0]!.stats().completed, 1, "only the trusted client's task ran");
});

test("TLS without a client CA: a client that trusts the server's CA gets through without a certificate of its own; plain text is refused", async (t) => {
  const { file } = makeCertificates(t);
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  const balancer = await fleet.addBalancer({ tls: { certFile: file('server.pem'), keyFile: file('server.key') } });
  const trusting = client(balancer.address, channelSecurity({ caFile: file('ca.pem') }, 'test').credentials, t);
  const done = await submit(trusting, task({ integration: 'echo', payload: Buffer.from('tls') }));
  assert.ok(done.ok && done.response.result?.toString() === 'tls', JSON.stringify(done));
  const plain = await submit(client(balancer.address, grpc.credentials.createInsecure(), t), task({ integration: 'echo' }), 3000);
  assert.ok(!plain.ok && plain.status === grpc.status.UNAVAILABLE, JSON.stringify(plain));
});

test('a balancer without a client certificate cannot reach workers that require one: the task fails with a coded error', async (t) => {
  const { file } = makeCertificates(t);
  const fleet = await startFleet(t);
  await fleet.addWorker({
    cluster: 'baseline',
    maxParallelism: 1,
    tls: { certFile: file('server.pem'), keyFile: file('server.key'), clientCaFile: file('ca.pem') },
  });
  await fleet.addBalancer({ workerTls: { caFile: file('ca.pem') }, maxDispatchAttempts: 1, defaultTaskTimeoutMs: 3000 });
  const result = await submit(fleet.clients[0]!, task({ integration: 'echo' }), 5000);
  assert.ok(!result.ok && result.code.startsWith('HR_ERR_'), JSON.stringify(result));
  assert.equal(fleet.workers[0]!.stats().completed, 0);
});

test("TLS settings are checked at start: missing files, non-PEM files, a key that is not the certificate's, and half-given flags name the setting", async (t) => {
  const { file } = makeCertificates(t);
  const fleet = await startFleet(t);
  await assert.rejects(
    fleet.addWorker({ cluster: 'baseline', tls: { certFile: file('nope.pem'), keyFile: file('server.key') } }),
    /tls\.certFile: cannot read .*nope\.pem/,
  );
  await assert.rejects(fleet.addBalancer({ workerTls: { caFile: file('server.ext') } }), /workerTls\.caFile: .*server\.ext is not a PEM file/);
  await assert.rejects(fleet.addBalancer({ tls: { certFile: file('server.pem'), keyFile: file('client.key') } }), /tls: .*key values mismatch/);
  await assert.rejects(
    fleet.addBalancer({ workerTls: { caFile: file('ca.pem'), certFile: file('client.pem') } }),
    /workerTls.*certFile and keyFile go together/,
  );
  assert.throws(() => serverTlsFromOptions({ tlsCert: file('server.pem') }), /--tls-cert and --tls-key .* go together/);
  assert.throws(() => workerTlsFromOptions({ workerTlsCert: file('client.pem'), workerTlsKey: file('client.key') }), /need --worker-tls-ca/);
  assert.equal(fleet.workers.length + fleet.balancers.length, 0, 'nothing started');
});
