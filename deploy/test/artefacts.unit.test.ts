import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import {
  alertsTestPath,
  allPanels,
  dashboardPath,
  dashboardProvidersPath,
  datasourcesPath,
  metricNamesIn,
  readDashboard,
  readPrometheusConfig,
  readRules,
  readYaml,
  recordedNames,
  usedMetricNames,
} from './artefacts';
import { knownSeriesNames, metricCatalogue } from './metric-catalogue';

test('metricNamesIn finds the metric names of a PromQL expression and nothing else', () => {
  assert.deepEqual(
    metricNamesIn(
      'histogram_quantile(0.95, sum by (cluster, le) (rate(a_seconds_bucket{cluster="$cluster",x=~"y|z"}[$__rate_interval]))) / ignoring (cluster) b:c:ratio offset 5m',
    ),
    ['a_seconds_bucket', 'b:c:ratio'],
  );
  assert.deepEqual(metricNamesIn('max(x_total) == 1 and on (i) sum without (kind) (y) > 1e3 or vector(0)'), ['x_total', 'y']);
});

test('the catalogue follows Prometheus naming: counters end in _total, others do not, units in names', () => {
  for (const [name, type] of Object.entries(metricCatalogue)) {
    if (type === 'counter') assert.match(name, /_total$/, name);
    // nodejs_active_handles_total is prom-client's (a gauge named like a counter): not ours to rename.
    else if (name !== 'nodejs_active_handles_total') assert.doesNotMatch(name, /_total$/, name);
    if (type === 'histogram') assert.match(name, /_seconds$/, `${name}: histograms here measure time`);
  }
});

test('rules and dashboard use only metrics Headroom exposes, or the recording rules', () => {
  const recorded = recordedNames();
  const unknown = [...usedMetricNames()].filter(([name]) => !knownSeriesNames.has(name) && !recorded.has(name));
  assert.deepEqual(unknown, []);
});

test('recording rules follow level:metric:operations; alerts carry a severity, a summary and a description', () => {
  const rules = readRules();
  assert.ok(rules.length > 0);
  for (const { rule } of rules) {
    if (rule.record) {
      assert.match(rule.record, /^[a-z_]+:[a-z_]+:[a-z0-9_]+$/, rule.record);
      continue;
    }
    assert.ok(rule.alert, JSON.stringify(rule));
    assert.match(rule.alert, /^Headroom[A-Z]\w+$/);
    assert.ok(['info', 'warning', 'critical'].includes(rule.labels?.severity ?? ''), `${rule.alert}: severity ${rule.labels?.severity}`);
    assert.ok(rule.annotations?.summary && rule.annotations.description, `${rule.alert}: summary and description`);
  }
  const alerts = rules.flatMap(({ rule }) => (rule.alert ? [rule.alert] : []));
  // The alerts the deployment promises (deploy/prometheus/alerts.yml), each unit-tested.
  for (const expected of [
    'HeadroomCandidateLatencyP50High',
    'HeadroomGcTimeHigh',
    'HeadroomEventLoopDelayHigh',
    'HeadroomHeapNearLimit',
    'HeadroomRollbackOverrideActive',
    'HeadroomAuditOutboxWaiting',
    'HeadroomAuditEntriesDropped',
  ]) {
    assert.ok(alerts.includes(expected), `${expected} in ${alerts.join(', ')}`);
  }
});

test('every alert has a unit test in alerts.test.yml, both firing and not firing', () => {
  const { tests } = readYaml(alertsTestPath) as {
    tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
  };
  const cases = tests.flatMap((t) => t.alert_rule_test ?? []);
  for (const { rule } of readRules()) {
    if (!rule.alert) continue;
    const mine = cases.filter((c) => c.alertname === rule.alert);
    assert.ok(
      mine.some((c) => c.exp_alerts.length > 0),
      `${rule.alert} is never shown firing`,
    );
    assert.ok(
      mine.some((c) => c.exp_alerts.length === 0),
      `${rule.alert} is never shown not firing`,
    );
  }
});

test('prometheus.yml scrapes balancers, workers and the control plane at the documented paths', () => {
  const jobs = new Map(readPrometheusConfig().scrape_configs.map((job) => [job.job_name, job]));
  assert.equal(jobs.get('headroom-balancer')?.metrics_path, '/metrics');
  assert.equal(jobs.get('headroom-worker')?.metrics_path, '/metrics');
  assert.equal(jobs.get('headroom-control-plane')?.metrics_path, '/api/v1/metrics');
  const names = (job: string) => (jobs.get(job)?.dns_sd_configs ?? []).flatMap((sd) => sd.names);
  assert.deepEqual(names('headroom-balancer'), ['balancer']);
  assert.deepEqual(names('headroom-worker'), ['worker-baseline', 'worker-candidate']);
  assert.deepEqual(names('headroom-control-plane'), ['control-plane']);
  // A worker's task metrics carry a `cluster` label of their own: it must not become exported_cluster.
  assert.equal(jobs.get('headroom-worker')?.['honor_labels'], true);
});

test('the Grafana dashboard is valid JSON of schema ~39 whose queries all use the provisioned datasource', () => {
  const text = fs.readFileSync(dashboardPath, 'utf8');
  assert.doesNotMatch(text, /DS_PROMETHEUS|__inputs/, 'an exported dashboard with an input to fill: provisioning cannot');
  const dashboard = readDashboard();
  assert.ok(dashboard.schemaVersion >= 36 && dashboard.schemaVersion <= 41, `schemaVersion ${dashboard.schemaVersion}`);
  assert.equal(dashboard.uid, 'headroom');

  const { datasources } = readYaml(datasourcesPath) as { datasources: { uid: string; type: string }[] };
  const prometheus = datasources.find((d) => d.type === 'prometheus');
  assert.ok(prometheus, 'a provisioned Prometheus datasource');
  const { providers } = readYaml(dashboardProvidersPath) as { providers: { type: string; options: { path: string } }[] };
  assert.equal(providers[0]?.type, 'file');

  const panels = allPanels(dashboard);
  const ids = panels.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  for (const panel of panels) {
    const { x, w, h } = panel.gridPos;
    assert.ok(x >= 0 && w > 0 && h > 0 && x + w <= 24, `panel "${panel.title}" fits the 24-column grid`);
    if (panel.type === 'row') continue;
    assert.equal(panel.datasource?.uid, prometheus.uid, `panel "${panel.title}" datasource`);
    assert.ok((panel.targets ?? []).length > 0, `panel "${panel.title}" has queries`);
    const refIds = (panel.targets ?? []).map((target) => target.refId);
    assert.equal(new Set(refIds).size, refIds.length, `panel "${panel.title}" refIds are unique`);
    for (const target of panel.targets ?? []) {
      assert.equal(target.datasource?.uid, prometheus.uid, `panel "${panel.title}" ${target.refId} datasource`);
      assert.ok(target.expr, `panel "${panel.title}" ${target.refId} has an expression`);
    }
    if (panel.repeat)
      assert.ok(
        dashboard.templating.list.some((v) => v.name === panel.repeat),
        `panel "${panel.title}" repeats over a variable that exists`,
      );
  }
  for (const variable of dashboard.templating.list) assert.equal(variable.datasource?.uid, prometheus.uid, `variable ${variable.name} datasource`);

  // The views the admin UI has.
  const titles = panels.map((p) => p.title).join('\n');
  for (const view of [
    /Cluster \$cluster/,
    /Capacity and tasks in flight/,
    /Queue depth by priority/,
    /Latency ratio p50/,
    /Latency ratio p95/,
    /Heap used/,
    /GC time share/,
    /Event-loop utilisation/,
    /Event-loop delay/,
    /Upstream connections/,
    /Rollback propagation/,
    /Rollback override/,
  ]) {
    assert.match(titles, view);
  }
});
