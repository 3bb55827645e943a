/**
 * A worker in the ledger that no balancer can connect to (the address it advertises has nothing
 * listening: a typo in --advertise-host, a wrong port mapping), with more free slots than the
 * real one, so least-loaded picks it first. Real Redis, real gRPC on port 0.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import pino from 'pino';
import { eventually, freePort, startFleet, submit, task } from '@headroom/testkit';

function metricValue(metrics: string, name: string, labels: string): number {
  const escaped = labels.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return Number(new RegExp(`^${name}\\{${escaped}\\} (\\d+)$`, 'm').exec(metrics)?.[1] ?? 0);
}

const unreachableRetries = (metrics: string) => metricValue(metrics, 'headroom_balancer_dispatch_retries_total', 'reason="unreachable"');
const ejections = (metrics: string) => metricValue(metrics, 'headroom_balancer_workers_ejected_total', 'cluster="baseline",reason="unreachable"');

test('a worker no balancer can reach is ejected after 3 connection failures, for every balancer, and comes back once its health check passes', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', workerId: 'good', maxParallelism: 2 });
  const deadPort = await freePort();
  const deadAddress = `127.0.0.1:${deadPort}`;
  // Its heartbeats reach Redis (the worker runs), but nothing answers at the address it advertises.
  const beat = () => fleet.ledger.heartbeat('baseline', { workerId: 'ghost', address: deadAddress, capacity: 4, draining: false, heldLeaseIds: [] });
  await beat();
  const beating = setInterval(() => void beat().catch(() => undefined), 200);
  t.after(() => clearInterval(beating));

  const logs: { level: number; msg: string; [key: string]: unknown }[] = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
  const ejectionOptions = { ejectAfterConnectFailures: 3, ejectionBackoffMs: 1000, healthCheckTimeoutMs: 300, directoryRefreshIntervalMs: 200 };
  const first = await fleet.addBalancer(ejectionOptions, undefined, logger);
  for (let i = 0; i < 20; i++) {
    const result = await submit(fleet.clients[0]!, task());
    assert.ok(result.ok && result.response.placement?.workerId === 'good', JSON.stringify(result));
  }
  let metrics = await first.registry.metrics();
  assert.equal(unreachableRetries(metrics), 3, 'the 3 failures that ejected it, and none after');
  assert.equal(ejections(metrics), 1);
  const warning = logs.find((l) => l.level === 40 && /worker ejected/.test(l.msg));
  assert.ok(warning, 'logged at warn');
  assert.deepEqual([warning.workerId, warning.address, warning.cluster], ['ghost', deadAddress, 'baseline']);
  assert.match(String(warning.lastError), /No connection established|ECONNREFUSED/);
  let snapshot = await fleet.ledger.snapshot('baseline');
  const ghost = snapshot.workers.find((w) => w.workerId === 'ghost')!;
  assert.ok(ghost.unreachableUntilMs !== null, 'the ledger holds the mark');
  assert.equal(ghost.ejectedReason, 'unreachable');
  assert.equal(snapshot.totalCapacity, 2, "the ghost's slots are out of the totals");
  // The leases of the dispatches that failed to connect were given back.
  await eventually('every lease given back', 2000, async () => ((await fleet.ledger.snapshot('baseline')).leases === 0 ? true : undefined));

  // A second balancer sharing the ledger never tries it.
  const second = await fleet.addBalancer();
  for (let i = 0; i < 10; i++) {
    const result = await submit(fleet.clients[1]!, task());
    assert.ok(result.ok && result.response.placement?.workerId === 'good' && result.response.placement.attempts === 1, JSON.stringify(result));
  }
  assert.equal(unreachableRetries(await second.registry.metrics()), 0);
  assert.equal(ejections(await second.registry.metrics()), 0);

  // The health check at the end of the back-off fails: marked again, for longer.
  await eventually('ejected again', 3000, async () => (ejections(await first.registry.metrics()) >= 2 ? true : undefined));
  assert.ok(logs.some((l) => l.level === 40 && /ejected again/.test(l.msg) && l.backoffMs === 2000));
  snapshot = await fleet.ledger.snapshot('baseline');
  assert.ok(snapshot.workers.find((w) => w.workerId === 'ghost')!.unreachableUntilMs !== null, 'still marked');

  // Now a real worker answers at that address: the next health check passes and it gets tasks again.
  clearInterval(beating);
  const revived = await fleet.addWorker({ cluster: 'baseline', workerId: 'ghost', port: deadPort, maxParallelism: 4 });
  assert.equal(revived.address, deadAddress);
  const retriesBefore = unreachableRetries(await first.registry.metrics());
  await eventually('back in the ledger', 6000, async () => ((await fleet.ledger.snapshot('baseline')).totalCapacity === 6 ? true : undefined));
  await eventually('the health check passed', 1000, () => (logs.some((l) => l.level === 30 && /health check passed/.test(l.msg)) ? true : undefined));
  snapshot = await fleet.ledger.snapshot('baseline');
  assert.equal(snapshot.workers.find((w) => w.workerId === 'ghost')!.unreachableUntilMs, null);
  assert.match(
    await first.registry.metrics(),
    /^headroom_balancer_workers_returned_total\{cluster="baseline",reason="unreachable",return="probe"\} 1$/m,
    'said how it came back',
  );
  const placements = [];
  for (let i = 0; i < 10; i++) {
    const result = await submit(fleet.clients[i % 2]!, task());
    assert.ok(result.ok, JSON.stringify(result));
    placements.push(result.response.placement?.workerId);
  }
  assert.ok(placements.filter((p) => p === 'ghost').length >= 5, `the worker with the most free slots gets tasks again: ${placements.join(', ')}`);
  metrics = await first.registry.metrics();
  assert.equal(unreachableRetries(metrics), retriesBefore, 'no failed attempt after it came back');
  assert.ok(revived.stats().completed >= 5);
});

test('with ejection turned off (ejectAfterConnectFailures 0) every task tries the unreachable worker first', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', workerId: 'good', maxParallelism: 2 });
  const deadAddress = `127.0.0.1:${await freePort()}`;
  const beat = () => fleet.ledger.heartbeat('baseline', { workerId: 'ghost', address: deadAddress, capacity: 4, draining: false, heldLeaseIds: [] });
  await beat();
  const beating = setInterval(() => void beat().catch(() => undefined), 200);
  t.after(() => clearInterval(beating));
  const balancer = await fleet.addBalancer({ ejectAfterConnectFailures: 0 });
  for (let i = 0; i < 8; i++) assert.ok((await submit(fleet.clients[0]!, task())).ok);
  const metrics = await balancer.registry.metrics();
  assert.equal(unreachableRetries(metrics), 8);
  assert.equal(ejections(metrics), 0);
  assert.equal((await fleet.ledger.snapshot('baseline')).workers.find((w) => w.workerId === 'ghost')!.unreachableUntilMs, null);
});
