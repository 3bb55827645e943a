/**
 * A real Prometheus, configured from deploy/prometheus/prometheus.yml (only discovery and the
 * intervals changed), scrapes a balancer, a baseline and a candidate worker and the control
 * plane, each a CLI process, while a bounded load runs and a rollback happens. The metrics,
 * the recording rules and the dashboard's queries are then read back through its HTTP API.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import {
  cliPaths,
  connected,
  ControlPlaneApi,
  eventually,
  json,
  type ReadyProcess,
  spawnReady,
  submit,
  task,
  testRedisUrl,
  uniquePrefix,
} from '@headroom/testkit';
import { startTestUnleash, testSchema } from '@headroom/unleash-local';
import { BalancerService, type BalancerClient, type Task } from '@headroom/proto';
import * as grpc from '@grpc/grpc-js';
import {
  dashboardExpressions,
  readDashboard,
  readPrometheusConfig,
  readRules,
  recordedNames,
  ruleFilePaths,
  substituteVariables,
  usedMetricNames,
  type PrometheusConfig,
} from './artefacts';
import { startPrometheus, type PrometheusServer } from './prometheus-server';

const { worker: workerCli, balancer: balancerCli, controlPlane: controlPlaneCli } = cliPaths;
const handlersModule = path.join(__dirname, 'fixtures', 'handlers.js');
const operatorToken = 'deploy-test-operator-0123456789';

/**
 * prometheus.yml for the test: every DNS-discovered service becomes a static target on
 * 127.0.0.1 that carries the `__meta_dns_name` DNS discovery would give it, so each job's own
 * relabelling, paths and options are what is tested. Scrapes and rules run every second.
 */
function testConfig(config: PrometheusConfig, targets: Record<string, string[]>): object {
  return {
    ...config,
    global: { ...config.global, scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' },
    rule_files: ruleFilePaths(),
    scrape_configs: config.scrape_configs.map(({ dns_sd_configs = [], static_configs = [], scrape_interval: _i, scrape_timeout: _t, ...job }) => ({
      ...job,
      static_configs: [
        ...static_configs,
        ...dns_sd_configs.flatMap((sd) =>
          sd.names.map((name) => {
            const local = targets[name];
            if (!local) throw new Error(`prometheus.yml discovers "${name}" (job ${job.job_name}): the test has no process for it`);
            return { targets: local, labels: { __meta_dns_name: name } };
          }),
        ),
      ],
    })),
  };
}

const hostPort = (port: number | undefined) => {
  assert.ok(port, 'the process reports its metrics port');
  return `127.0.0.1:${port}`;
};

async function value(prometheus: PrometheusServer, expr: string): Promise<number | undefined> {
  const result = await prometheus.query(expr);
  return result.length === 0 ? undefined : Number(result[0]!.value[1]);
}

interface Load {
  /** Stops the clients and returns how many tasks ended how (ok:<cluster>, handler:<code>, or the Headroom code). */
  stop(): Promise<Record<string, number>>;
}

/**
 * A bounded load on the balancer: 6 clients, one task at a time each, at most 20,000 tasks.
 * Mostly short sleeps on bank-a and bank-b, both priorities; 1 in 10 fails in its handler,
 * 1 in 10 calls the upstream, 1 in 50 outlives its deadline (an error at the balancer).
 */
function startLoad(client: BalancerClient, upstreamUrl: string): Load {
  let stopping = false;
  let submitted = 0;
  const outcomes: Record<string, number> = {};
  const next = (i: number): Task => {
    const key = `k-${i}`;
    if (i % 50 === 0) return task({ integration: 'bank-b', key, payload: json({ sleepMs: 5000 }), deadlineUnixMs: Date.now() + 1000 });
    if (i % 10 === 0) return task({ integration: 'bank-a', key, payload: json({ fail: 'HR_ERR_DEMO_FAILURE' }) });
    if (i % 10 === 1) return task({ integration: 'upstream', key, payload: json({ upstreamUrl }) });
    return task({
      integration: i % 10 < 6 ? 'bank-a' : 'bank-b',
      key,
      priority: i % 2 ? 'USER_PRESENT' : 'BACKGROUND',
      payload: json({ sleepMs: 2 + (i % 9) }),
    });
  };
  const runClient = async () => {
    while (!stopping && submitted < 20_000) {
      const result = await submit(client, next(submitted++), 10_000);
      const outcome = result.ok ? (result.response.error ? `handler:${result.response.error.code}` : `ok:${result.response.placement?.cluster}`) : result.code;
      outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    }
  };
  const clients = Promise.all(Array.from({ length: 6 }, runClient));
  let stopped: Promise<Record<string, number>> | undefined;
  return {
    stop: () =>
      (stopped ??= (async () => {
        stopping = true;
        await clients;
        client.close();
        return outcomes;
      })()),
  };
}

test('Prometheus scrapes a balancer, workers and the control plane under load; rules and dashboard queries evaluate', { timeout: 90_000 }, async (t) => {
  const startedAt = Date.now();
  const phases: string[] = [];
  const mark = (phase: string) => phases.push(`${phase} ${Date.now() - startedAt} ms`);
  const keyPrefix = uniquePrefix('deploy');
  const processes: ReadyProcess[] = [];
  let prometheus: PrometheusServer | undefined;
  let load: Load | undefined;
  const unleash = await startTestUnleash();
  mark('unleash');
  // One hook, so the order is ours: the load, Prometheus, the processes, Unleash, the keys.
  t.after(async () => {
    await load?.stop();
    await prometheus?.stop();
    await Promise.all(processes.map((p) => p.kill('SIGKILL')));
    await unleash.stop();
    const redis = await connected(testRedisUrl);
    const keys = await redis.keys(`*${keyPrefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });

  // An upstream for the `upstream` integration, so the workers' HTTP agent has connections.
  const upstream = http.createServer((_request, response) => setTimeout(() => response.end('upstream ok'), 5));
  // Kept alive past the test: a worker's idle pool closes with its connections, and the
  // origin's series leave the metrics with it.
  upstream.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  t.after(async () => {
    const closed = new Promise((resolve) => upstream.close(resolve));
    upstream.closeAllConnections();
    await closed;
  });
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/`;

  const shared = ['--redis-url', testRedisUrl, '--key-prefix', keyPrefix];
  const flagArgs = ['--unleash-url', unleash.url, '--unleash-client-token', unleash.clientToken, '--flags-refresh-interval-ms', '200'];
  // The control plane's audit log: a schema of this test's own, dropped once the process stopped.
  const database = testSchema('hr_deploy');
  const controlPlane = await spawnReady(t, controlPlaneCli, [
    ...shared,
    '--port',
    '0',
    '--unleash-url',
    unleash.url,
    '--unleash-admin-token',
    unleash.adminToken,
    '--operator-tokens',
    `deploy-test=${operatorToken}`,
    '--database-url',
    database.url,
    '--database-schema',
    database.schema,
  ]);
  t.after(() => database.drop());
  processes.push(controlPlane);
  const controlPlaneUrl = (controlPlane.ready as unknown as { url: string }).url;
  const api = new ControlPlaneApi({ apiUrl: `${controlPlaneUrl}/api/v1`, token: operatorToken });
  const started = await Promise.all([
    spawnReady(t, workerCli, [
      ...shared,
      ...flagArgs,
      '--cluster',
      'baseline',
      '--max-parallelism',
      '4',
      '--heartbeat-interval-ms',
      '200',
      '--handlers',
      handlersModule,
      '--metrics-port',
      '0',
    ]),
    spawnReady(t, workerCli, [
      ...shared,
      ...flagArgs,
      '--cluster',
      'candidate',
      '--max-parallelism',
      '8',
      '--heartbeat-interval-ms',
      '200',
      '--handlers',
      handlersModule,
      '--metrics-port',
      '0',
    ]),
    spawnReady(t, balancerCli, [...shared, ...flagArgs, '--metrics-port', '0']),
  ]);
  processes.push(...started);
  const [baselineWorker, candidateWorker, balancer] = started as [ReadyProcess, ReadyProcess, ReadyProcess];

  prometheus = await startPrometheus(
    testConfig(readPrometheusConfig(), {
      balancer: [hostPort(balancer.ready.metricsPort)],
      'worker-baseline': [hostPort(baselineWorker.ready.metricsPort)],
      'worker-candidate': [hostPort(candidateWorker.ready.metricsPort)],
      'control-plane': [new URL(controlPlaneUrl).host],
    }),
  );
  const server = prometheus;
  mark('processes and prometheus');

  // Half of the traffic to the candidate, through Unleash as in production.
  await api.setTraffic({ defaultPercent: 50 });

  const client = new BalancerService(balancer.ready.address, grpc.credentials.createInsecure());
  load = startLoad(client, upstreamUrl);

  // Both clusters ran bank-a tasks, and the latency ratio (a recording rule on the workers'
  // histograms, over both clusters) has a value.
  const ratio = await eventually('the p50 latency ratio of bank-a', 40_000, () =>
    value(server, 'integration:headroom_worker_task_duration_seconds:p50_candidate_baseline_ratio_5m{integration="bank-a"}'),
  );
  assert.ok(Number.isFinite(ratio) && ratio > 0, `ratio ${ratio}`);
  mark('latency ratio');

  // A rollback: the balancer applies the override, the control plane counts and times it.
  await api.rollback({ reason: 'deploy scrape test' });
  await eventually('the override is active in Prometheus', 10_000, async () =>
    (await value(server, 'max(headroom_balancer_override_active)')) === 1 ? true : undefined,
  );
  await eventually('the rollback propagation is recorded', 10_000, async () =>
    ((await value(server, 'sum(headroom_control_rollback_propagation_seconds_count)')) ?? 0) > 0 ? true : undefined,
  );
  // The alert's expression holds: pending (its `for` is 30 min).
  await eventually('HeadroomRollbackOverrideActive pending', 10_000, async () => {
    const { alerts } = await server.get<{ alerts: { labels: Record<string, string>; state: string }[] }>('/api/v1/alerts');
    return alerts.some((a) => a.labels['alertname'] === 'HeadroomRollbackOverrideActive' && a.state === 'pending') ? true : undefined;
  });
  mark('rollback');
  // A few more scrapes of the load after the rollback, then stop it.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const outcomes = await load.stop();
  t.diagnostic(`tasks: ${JSON.stringify(outcomes)}`);
  assert.ok((outcomes['ok:baseline'] ?? 0) > 0 && (outcomes['ok:candidate'] ?? 0) > 0, JSON.stringify(outcomes));
  assert.ok((outcomes['handler:HR_ERR_DEMO_FAILURE'] ?? 0) > 0 && (outcomes['HR_ERR_DEADLINE_EXCEEDED'] ?? 0) > 0, JSON.stringify(outcomes));
  // Let the last scrapes and rule evaluations see the final counts.
  await new Promise((resolve) => setTimeout(resolve, 2500));

  // Every target is up: the jobs' ports and metrics paths are right.
  // (A scrape may time out on a loaded machine: the last 10 s count.)
  const up = await server.query('max_over_time(up[10s])');
  assert.deepEqual(up.map((s) => `${s.metric['job']} ${s.value[1]}`).sort(), [
    'headroom-balancer 1',
    'headroom-control-plane 1',
    'headroom-worker 1',
    'headroom-worker 1',
  ]);

  // The metrics the issue names, read back.
  for (const expr of [
    'sum(headroom_balancer_tasks_total)',
    'sum(headroom_worker_task_duration_seconds_count)',
    'sum(headroom_balancer_dispatch_overhead_seconds_count)',
    'sum(nodejs_gc_duration_seconds_count)',
    'sum(headroom_worker_handler_errors_total)',
    'sum(headroom_control_rollbacks_total)',
    // Idle upstream connections close after a while: any time during the test counts.
    'sum(max_over_time(headroom_worker_upstream_connections{state="connected"}[1m]))',
  ]) {
    const v = await value(server, expr);
    assert.ok(v !== undefined && v > 0, `${expr} = ${v}`);
  }
  for (const metric of ['nodejs_heap_size_used_bytes', 'headroom_heap_limit_bytes', 'headroom_eventloop_utilization_ratio']) {
    const series = await server.query(metric);
    assert.deepEqual([...new Set(series.map((s) => s.metric['job']))].sort(), ['headroom-balancer', 'headroom-control-plane', 'headroom-worker'], metric);
    for (const s of series) {
      const v = Number(s.value[1]);
      assert.ok(metric === 'headroom_eventloop_utilization_ratio' ? v >= 0 && v <= 1 : v > 0, `${metric}${JSON.stringify(s.metric)} = ${v}`);
    }
  }
  // Workers' gauges get their cluster from the service name; their own cluster label is kept.
  const capacity = await server.query('sum by (cluster) (headroom_worker_max_parallelism)');
  assert.deepEqual(Object.fromEntries(capacity.map((s) => [s.metric['cluster'], Number(s.value[1])])), { baseline: 4, candidate: 8 });
  assert.deepEqual(await server.query('headroom_worker_task_duration_seconds_count{exported_cluster!=""}'), []);
  const byCluster = await server.query('sum by (cluster) (headroom_worker_task_duration_seconds_count)');
  assert.deepEqual(byCluster.map((s) => s.metric['cluster']).sort(), ['baseline', 'candidate']);

  // Every rule evaluates without error, and the recording rules have data.
  const { groups } = await server.get<{ groups: { rules: { name: string; type: string; health: string; lastError?: string }[] }[] }>('/api/v1/rules');
  const rules = groups.flatMap((g) => g.rules);
  assert.deepEqual(
    rules.map((r) => r.name).sort(),
    readRules()
      .map(({ rule }) => rule.record ?? rule.alert)
      .sort(),
    'Prometheus loaded every rule',
  );
  for (const rule of rules) assert.equal(rule.health, 'ok', `${rule.name}: ${rule.health} ${rule.lastError ?? ''}`);
  for (const name of recordedNames()) {
    const series = await server.query(name);
    assert.ok(series.length > 0, `recording rule ${name} has no series`);
  }

  // Every metric the rules and the dashboard use exists in Prometheus, as scraped.
  const names = new Set(await server.get<string[]>('/api/v1/label/__name__/values'));
  const recorded = recordedNames();
  const missing = [...usedMetricNames()].filter(([name]) => !recorded.has(name) && !names.has(name));
  assert.deepEqual(missing, [], 'metrics used by the rules or the dashboard that no process exposes');

  // Every dashboard query runs and shows data.
  const empty: string[] = [];
  for (const { where, expr } of dashboardExpressions(readDashboard())) {
    const runnable = substituteVariables(expr, { rateInterval: '10s', range: '5m', variables: { cluster: 'candidate', integration: '.*' } });
    const result = await server.query(runnable).catch((error: unknown) => assert.fail(`${where}: ${runnable}: ${String(error)}`));
    if (result.length === 0) empty.push(`${where}: ${runnable}`);
  }
  assert.deepEqual(empty, [], 'dashboard queries without data');
  mark('checks');
  t.diagnostic(`timeline: ${phases.join(', ')}`);
});
