import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { stringify as toYaml } from 'yaml';
import { alertsTestPath, dashboardExpressions, prometheusConfigPath, prometheusDir, readDashboard, ruleFilePaths, substituteVariables } from './artefacts';
import { promtool } from './promtool';

test('promtool check config: prometheus.yml and the rule files it loads', () => {
  const { status, output } = promtool(['check', 'config', prometheusConfigPath]);
  assert.equal(status, 0, output);
  assert.match(output, /SUCCESS/);
});

test('promtool check rules: recording rules and alerts', () => {
  const files = ruleFilePaths();
  assert.ok(files.length >= 2, `rule files: ${files.join(', ')}`);
  const { status, output } = promtool(['check', 'rules', ...files]);
  assert.equal(status, 0, output);
});

test('promtool test rules: every alert fires when it should and not otherwise', () => {
  // Run from the rules' folder: the test file names the rule files relative to it.
  const { status, output } = promtool(['test', 'rules', path.basename(alertsTestPath)], prometheusDir);
  assert.equal(status, 0, output);
  assert.match(output, /SUCCESS/);
});

test('every PromQL expression of the Grafana dashboard parses (checked by promtool as recording rules)', (t) => {
  const expressions = dashboardExpressions(readDashboard());
  assert.ok(expressions.length > 20, `only ${expressions.length} expressions`);
  const rules = expressions.map(({ expr }, i) => ({
    record: `dashboard:expression_${i}`,
    expr: substituteVariables(expr, { rateInterval: '1m', range: '1h', variables: { cluster: 'baseline', integration: '.*' } }),
  }));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-deploy-dashboard-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'dashboard-expressions.yml');
  fs.writeFileSync(file, toYaml({ groups: [{ name: 'dashboard', rules }] }));
  const { status, output } = promtool(['check', 'rules', file]);
  const where = expressions.map(({ where }, i) => `dashboard:expression_${i} = ${where}`).join('\n');
  assert.equal(status, 0, `${output}\n${where}`);
});
