/**
 * Two ways a balancer used to get ejection wrong, on a real stack (real Redis, real workers on
 * port 0, both worker transports):
 * - its own TLS problem (no client certificate, workers that require one) counted as workers
 *   unreachable, and ejected them for every balancer;
 * - a worker that accepts connections and never answers was never counted unreachable: each
 *   task waited there until its deadline.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { channelSecurity, checkHealth } from '@headroom/proto';
import { eventually, json, startFleet, submit, task } from '@headroom/testkit';
import { makeCertificates } from './certificates';

function metricValue(metrics: string, name: string, labels: string): number {
  const escaped = labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return Number(new RegExp(`^${name}\\{${escaped}\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0);
}

type LogLine = { level: number; msg: string; [key: string]: unknown };

function capturedLogger() {
  const logs: LogLine[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as LogLine) });
  return { logs, logger };
}

for (const workerTransport of ['http2', 'grpc-js'] as const) {
  test(`${workerTransport}: a balancer without its client certificate ejects no worker; it counts, logs and reports not ready, while a healthy balancer keeps every worker`, async (t) => {
    const { file } = makeCertificates(t);
    const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
    const workerTls = { certFile: file('server.pem'), keyFile: file('server.key'), clientCaFile: file('ca.pem') };
    for (const workerId of ['w1', 'w2', 'w3']) await fleet.addWorker({ cluster: 'baseline', workerId, maxParallelism: 2, tls: workerTls });
    // Everything that would eject quickly, and all of the cluster at once, if these failures counted.
    const ejectFast = {
      workerTransport,
      ejectAfterConnectFailures: 1,
      maxEjectedShare: 1,
      ejectionBackoffMs: 60_000,
      maxEjectionBackoffMs: 60_000,
      defaultTaskTimeoutMs: 5000,
    };
    const healthy = await fleet.addBalancer({ ...ejectFast, workerTls: { caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client.key') } });
    const { logs, logger } = capturedLogger();
    const broken = await fleet.addBalancer({ ...ejectFast, workerTls: { caFile: file('ca.pem') } }, undefined, logger);
    const [healthyClient, brokenClient] = fleet.clients;

    for (let i = 0; i < 6; i++) {
      const result = await submit(brokenClient!, task({ integration: 'echo' }), 8000);
      assert.ok(!result.ok && result.code === 'HR_ERR_NO_WORKER_TOOK_IT', `task ${i}: ${JSON.stringify(result)}`);
    }
    for (const worker of fleet.workers) assert.equal(worker.stats().completed, 0, 'nothing ran');

    const snapshot = await fleet.ledger.snapshot('baseline');
    assert.deepEqual(
      snapshot.workers.map((w) => [w.workerId, w.unreachableUntilMs]).sort(),
      [
        ['w1', null],
        ['w2', null],
        ['w3', null],
      ],
      'no worker is marked in the ledger',
    );
    const metrics = await broken.registry.metrics();
    assert.equal(
      metricValue(metrics, 'headroom_balancer_transport_errors_total', 'cluster="baseline",reason="tls"'),
      18,
      'each of the 3 attempts of the 6 tasks',
    );
    assert.equal(metricValue(metrics, 'headroom_balancer_workers_ejected_total', 'cluster="baseline",reason="unreachable"'), 0);
    assert.equal(metricValue(metrics, 'headroom_balancer_dispatch_retries_total', 'reason="unreachable"'), 0);
    assert.match(metrics, /^headroom_balancer_ready 0$/m);

    // Logged at error, rate-limited (one line per interval, not one per call), naming a worker's address and the cause.
    const faultLogs = logs.filter((l) => l.level === 50 && /own TLS/.test(l.msg) && /worker is not counted unreachable/.test(l.msg));
    assert.equal(faultLogs.length, 1, JSON.stringify(faultLogs));
    assert.ok(
      fleet.workers.some((w) => w.address === faultLogs[0]!.address),
      JSON.stringify(faultLogs[0]),
    );
    assert.equal(faultLogs[0]!.reason, 'tls');
    assert.ok(logs.some((l) => l.level === 50 && /balancer not ready/.test(l.msg)));

    // Its readiness: the gRPC health status orchestrators read, and its stats say why.
    const plain = channelSecurity(undefined, 'test');
    assert.deepEqual(await checkHealth(broken.address, plain, 'headroom.v1.Balancer', 2000), { status: 'NOT_SERVING' });
    assert.equal(broken.stats().ownTransportProblem?.reason, 'tls');
    assert.deepEqual(await checkHealth(healthy.address, plain, 'headroom.v1.Balancer', 2000), { status: 'SERVING' });
    assert.equal(healthy.stats().ownTransportProblem, null);

    // The healthy balancer has all the cluster: six tasks at once take every slot of the three workers.
    const running = Array.from({ length: 6 }, () => submit(healthyClient!, task({ payload: json({ sleepMs: 500 }) }), 8000));
    await eventually('every slot of every worker busy', 4000, () => (fleet.workers.every((w) => w.stats().inflight === 2) ? true : undefined));
    for (const result of await Promise.all(running)) assert.ok(result.ok && !result.response.error, JSON.stringify(result));
    assert.match(await healthy.registry.metrics(), /^headroom_balancer_ready 1$/m);
  });

  test(`${workerTransport}: a worker that accepts connections and never answers is ejected; tasks go to the healthy worker well before their deadline`, async (t) => {
    const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
    await fleet.addWorker({ cluster: 'baseline', workerId: 'good', maxParallelism: 2 });
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      silent.close();
    });
    const silentAddress = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    // Heartbeats reach Redis with more free slots than the good worker: least-loaded tries it first.
    const beat = () => fleet.ledger.heartbeat('baseline', { workerId: 'silent', address: silentAddress, capacity: 4, draining: false, heldLeaseIds: [] });
    await beat();
    const beating = setInterval(() => void beat().catch(() => undefined), 200);
    t.after(() => clearInterval(beating));

    const { logs, logger } = capturedLogger();
    const balancer = await fleet.addBalancer(
      {
        workerTransport,
        workerConnectTimeoutMs: 300,
        workerFirstByteTimeoutMs: 300,
        ejectAfterConnectFailures: 3,
        ejectionBackoffMs: 60_000,
        healthCheckTimeoutMs: 300,
      },
      undefined,
      logger,
    );
    const deadlineMs = 10_000;
    const tookMs: number[] = [];
    for (let i = 0; i < 8; i++) {
      const startedAt = performance.now();
      const result = await submit(fleet.clients[0]!, task({ deadlineUnixMs: Date.now() + deadlineMs }), deadlineMs + 2000);
      tookMs.push(performance.now() - startedAt);
      assert.ok(result.ok && result.response.placement?.workerId === 'good', `task ${i}: ${JSON.stringify(result)}`);
    }
    // Each of the first tasks lost one connect-and-first-byte bound (600 ms) at most on the silent worker.
    assert.ok(Math.max(...tookMs) < 2000, `every task answered in under 2 s of its 10 s deadline: ${tookMs.map(Math.round).join(', ')} ms`);
    const snapshot = await fleet.ledger.snapshot('baseline');
    const marked = snapshot.workers.find((w) => w.workerId === 'silent')!;
    assert.ok(marked.unreachableUntilMs !== null && marked.ejectedReason === 'unreachable', JSON.stringify(marked));
    const metrics = await balancer.registry.metrics();
    assert.equal(metricValue(metrics, 'headroom_balancer_workers_ejected_total', 'cluster="baseline",reason="unreachable"'), 1);
    assert.equal(metricValue(metrics, 'headroom_balancer_dispatch_retries_total', 'reason="unreachable"'), 3, 'the 3 timeouts that ejected it, none after');
    const warning = logs.find((l) => l.level === 40 && /worker ejected/.test(l.msg));
    assert.ok(warning && warning.address === silentAddress, JSON.stringify(warning));
    assert.ok(sockets.size >= 1, 'the balancer did connect to it');
  });
}
