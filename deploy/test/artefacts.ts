/**
 * The deploy artefacts (Prometheus config, rules, Grafana dashboard) as the tests read them,
 * and the PromQL each of them holds.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';

/** deploy/, from deploy/dist/test. */
export const deployDir = path.join(__dirname, '..', '..');
export const prometheusDir = path.join(deployDir, 'prometheus');
export const prometheusConfigPath = path.join(prometheusDir, 'prometheus.yml');
export const alertsTestPath = path.join(prometheusDir, 'alerts.test.yml');
export const dashboardPath = path.join(deployDir, 'grafana', 'dashboards', 'headroom.json');
export const datasourcesPath = path.join(deployDir, 'grafana', 'provisioning', 'datasources', 'prometheus.yml');
export const dashboardProvidersPath = path.join(deployDir, 'grafana', 'provisioning', 'dashboards', 'headroom.yml');

export function readYaml(file: string): unknown {
  return parseYaml(fs.readFileSync(file, 'utf8'));
}

export interface ScrapeConfig {
  job_name: string;
  metrics_path?: string;
  scrape_interval?: string;
  scrape_timeout?: string;
  dns_sd_configs?: { names: string[]; type?: string; port?: number }[];
  static_configs?: { targets: string[]; labels?: Record<string, string> }[];
  [key: string]: unknown;
}

export interface PrometheusConfig {
  global?: Record<string, unknown>;
  rule_files: string[];
  scrape_configs: ScrapeConfig[];
  [key: string]: unknown;
}

export function readPrometheusConfig(): PrometheusConfig {
  return readYaml(prometheusConfigPath) as PrometheusConfig;
}

/** The rule files prometheus.yml loads, as absolute paths. */
export function ruleFilePaths(): string[] {
  return readPrometheusConfig().rule_files.map((file) => path.resolve(prometheusDir, file));
}

export interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function readRules(): { file: string; group: string; rule: Rule }[] {
  return ruleFilePaths().flatMap((file) => {
    const { groups } = readYaml(file) as { groups: { name: string; rules: Rule[] }[] };
    return groups.flatMap((group) => group.rules.map((rule) => ({ file: path.basename(file), group: group.name, rule })));
  });
}

/** Names the recording rules define. */
export function recordedNames(): Set<string> {
  return new Set(readRules().flatMap(({ rule }) => (rule.record ? [rule.record] : [])));
}

// Grafana's dashboard model, as far as the tests look into it.
export interface DashboardTarget {
  datasource?: { type?: string; uid?: string };
  expr?: string;
  refId?: string;
  legendFormat?: string;
}
export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { h: number; w: number; x: number; y: number };
  targets?: DashboardTarget[];
  repeat?: string;
  panels?: DashboardPanel[];
}
export interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: DashboardPanel[];
  templating: { list: { name: string; type: string; datasource?: { uid?: string }; definition?: string; query?: { query?: string } | string }[] };
  annotations: { list: { name: string; datasource?: { type?: string; uid?: string }; expr?: string }[] };
}

export function readDashboard(): Dashboard {
  return JSON.parse(fs.readFileSync(dashboardPath, 'utf8')) as Dashboard;
}

/** Panels, rows' collapsed panels included. */
export function allPanels(dashboard: Dashboard): DashboardPanel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

/** Every PromQL expression of the dashboard, with where it comes from. */
export function dashboardExpressions(dashboard: Dashboard): { where: string; expr: string }[] {
  const fromPanels = allPanels(dashboard).flatMap((panel) =>
    (panel.targets ?? []).flatMap((target) => (target.expr ? [{ where: `panel "${panel.title}" ${target.refId ?? ''}`, expr: target.expr }] : [])),
  );
  const fromVariables = dashboard.templating.list.flatMap((variable) => {
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    // label_values(metric, label) is Grafana's, not PromQL: its metric is what matters.
    const metric = query ? /^label_values\(\s*(.+?)\s*,\s*\w+\s*\)$/.exec(query)?.[1] : undefined;
    return metric ? [{ where: `variable ${variable.name}`, expr: metric }] : [];
  });
  const fromAnnotations = dashboard.annotations.list.flatMap((annotation) =>
    annotation.expr ? [{ where: `annotation "${annotation.name}"`, expr: annotation.expr }] : [],
  );
  return [...fromPanels, ...fromVariables, ...fromAnnotations];
}

/**
 * Grafana's variables replaced so that Prometheus can run the expression: `$__rate_interval`
 * and `$__range` by durations, the dashboard's own variables by the values given.
 */
export function substituteVariables(expr: string, values: { rateInterval: string; range: string; variables: Record<string, string> }): string {
  return expr.replace(/\$\{?(\w+)\}?/g, (whole, name: string) => {
    if (name === '__rate_interval' || name === '__interval') return values.rateInterval;
    if (name === '__range') return values.range;
    const value = values.variables[name];
    if (value === undefined) throw new Error(`no value for the dashboard variable ${whole}`);
    return value;
  });
}

// PromQL words that are not metric names.
const promqlKeywords = new Set([
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'inf',
  'nan',
  'atan2',
]);

/**
 * The metric names a PromQL expression selects. A cheap lexical pass, not a parser: strings,
 * label matchers, ranges, grouping clauses and Grafana variables are dropped; what is left
 * that is not a function call or a keyword is a metric name.
 */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names = new Set<string>();
  // Not after a digit, a dot or a word character: skips 1e3, 5m, 0.5.
  for (const match of stripped.matchAll(/(?<![\w.])[a-zA-Z_:][\w:]*/g)) {
    const name = match[0];
    const isCall = /^\s*\(/.test(stripped.slice(match.index! + name.length));
    if (!isCall && !promqlKeywords.has(name.toLowerCase())) names.add(name);
  }
  return [...names];
}

/** Every metric name the rules and the dashboard use, with where each is used. */
export function usedMetricNames(): Map<string, string[]> {
  const used = new Map<string, string[]>();
  const note = (name: string, where: string) => used.set(name, [...(used.get(name) ?? []), where]);
  for (const { file, rule } of readRules()) for (const name of metricNamesIn(rule.expr)) note(name, `${file} ${rule.record ?? rule.alert}`);
  for (const { where, expr } of dashboardExpressions(readDashboard())) for (const name of metricNamesIn(expr)) note(name, `headroom.json ${where}`);
  return used;
}
