/**
 * What the operator missed in the slow-bank incident, over REST against a real control plane:
 * tasks that expire in a balancer's queue are errors of their cluster and integration, and the
 * ledger counting more slots in use than the workers run is shown as drift, per cluster and per
 * worker, and as a metric.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { clusterKeys } from '@headroom/fleet';
import { eventually, json, startStack, submit, task } from '@headroom/testkit';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';

let unleash: TestUnleash;
before(async () => {
  unleash = await startTestUnleash();
});
after(() => unleash.stop());

interface Cluster {
  role: string;
  capacity: number;
  inFlight: number;
  tasksPerSecond: number;
  errorsPerSecond: number;
  balancerErrorsPerSecond: number;
  balancerErrors: { integration: string; code: string; perSecond: number }[];
  heldByWorkers: number;
  ledgerDriftSlots: number;
}

test('tasks whose deadline passes in the balancer queue count as errors of their cluster and integration in GET /clusters', async (t) => {
  const stack = await startStack(t, unleash);
  const { fleet } = stack;
  await fleet.addWorker({ cluster: 'baseline', workerId: 'slow-b1', maxParallelism: 1, reportIntervalMs: 200 });
  await fleet.addWorker({ cluster: 'candidate', workerId: 'idle-c1', maxParallelism: 1, reportIntervalMs: 200 });
  await fleet.addBalancer({ candidatePercent: 0, balancerHeartbeatIntervalMs: 100 });
  const client = fleet.clients[0]!;
  // The slow bank holds the baseline's only slot; six tasks behind it expire in the queue.
  const slow = submit(client, task({ integration: 'bank-a', payload: json({ sleepMs: 2000 }) }));
  await eventually('the slow task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const expired = await Promise.all(Array.from({ length: 6 }, () => submit(client, task({ integration: 'bank-b', deadlineUnixMs: Date.now() + 300 }))));
  assert.ok(
    expired.every((r) => !r.ok && r.code === 'HR_ERR_DEADLINE_EXCEEDED'),
    JSON.stringify(expired),
  );
  assert.equal(fleet.workers[0]!.stats().failed, 0, 'no worker saw them fail');

  const clusters = await eventually('the balancer errors reach /clusters', 5000, async () => {
    const answer = await stack.api('GET', '/clusters');
    assert.equal(answer.status, 200);
    const body = answer.body as { clusters: Cluster[] };
    return body.clusters.find((c) => c.role === 'baseline')!.balancerErrorsPerSecond > 0 ? body.clusters : undefined;
  });
  const baseline = clusters.find((c) => c.role === 'baseline')!;
  // Six over the slots of the last 10 s: 10 to 20 s of them.
  assert.ok(baseline.balancerErrorsPerSecond >= 0.3 && baseline.balancerErrorsPerSecond <= 0.6, JSON.stringify(baseline));
  assert.deepEqual(baseline.balancerErrors, [{ integration: 'bank-b', code: 'HR_ERR_DEADLINE_EXCEEDED', perSecond: baseline.balancerErrorsPerSecond }]);
  assert.ok(baseline.errorsPerSecond >= baseline.balancerErrorsPerSecond, 'errors include them');
  assert.ok(baseline.tasksPerSecond >= baseline.errorsPerSecond, 'and so do tasks');
  const candidate = clusters.find((c) => c.role === 'candidate')!;
  assert.deepEqual([candidate.balancerErrorsPerSecond, candidate.balancerErrors, candidate.errorsPerSecond], [0, [], 0]);
  assert.ok((await slow).ok);
});

test('the ledger counting more slots than the worker runs shows as drift in /clusters, /workers and the metrics, until heartbeats settle it', async (t) => {
  const stack = await startStack(t, unleash);
  const { fleet } = stack;
  // Heartbeats 1.5 s apart: a lease record nobody holds counts from the next one, until one past the grace (a period).
  await fleet.addWorker({ cluster: 'baseline', workerId: 'drifting-w1', maxParallelism: 1, heartbeatIntervalMs: 1500 });
  await fleet.addBalancer({ candidatePercent: 0, heartbeatTimeoutMs: 10_000 });
  const running = submit(fleet.clients[0]!, task({ integration: 'bank-a', payload: json({ sleepMs: 8000 }) }));
  await eventually('the task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  // Two releases lost on their way: records the worker does not hold.
  const leases = `${clusterKeys(fleet.ledgerOptions.keyPrefix!, 'baseline').leasesPrefix}drifting-w1`;
  await fleet.redis.hset(leases, 'lost-1', String(Date.now()), 'lost-2', String(Date.now()));

  const drifting = await eventually('the next heartbeat counts them', 5000, async () => {
    const baseline = ((await stack.api('GET', '/clusters')).body as { clusters: Cluster[] }).clusters.find((c) => c.role === 'baseline')!;
    return baseline.ledgerDriftSlots === 2 ? baseline : undefined;
  });
  assert.deepEqual([drifting.capacity, drifting.inFlight, drifting.heldByWorkers], [1, 3, 1]);
  const worker = (
    (await stack.api('GET', '/workers')).body as { workers: { workerId: string; inFlight: number; heldAtHeartbeat: number; ledgerDriftSlots: number }[] }
  ).workers.find((w) => w.workerId === 'drifting-w1')!;
  assert.deepEqual([worker.inFlight, worker.heldAtHeartbeat, worker.ledgerDriftSlots], [3, 1, 2]);
  const metrics = await (await fetch(`${stack.controlPlane.url}/api/v1/metrics`)).text();
  assert.match(metrics, /^headroom_control_ledger_drift_slots\{cluster="baseline"\} 2$/m);
  assert.match(metrics, /^headroom_control_ledger_drift_slots\{cluster="candidate"\} 0$/m);

  // A heartbeat past the grace drops them: no drift, in the API and the metric.
  await eventually('the heartbeats settle it', 6000, async () => {
    const baseline = ((await stack.api('GET', '/clusters')).body as { clusters: Cluster[] }).clusters.find((c) => c.role === 'baseline')!;
    return baseline.ledgerDriftSlots === 0 && baseline.inFlight === 1 ? true : undefined;
  });
  assert.match(await (await fetch(`${stack.controlPlane.url}/api/v1/metrics`)).text(), /^headroom_control_ledger_drift_slots\{cluster="baseline"\} 0$/m);
  assert.ok((await running).ok);
});
