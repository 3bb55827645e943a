/**
 * docker-compose.yml, checked without a Docker engine: parsed as compose does, and compared
 * with the code (each CLI's `--help`, read now), the Dockerfile and the deploy/ files.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { datasourcesPath, dashboardProvidersPath, prometheusDir, readPrometheusConfig, readYaml, ruleFilePaths } from './artefacts';
import {
  bindMounts,
  commandOf,
  containerPorts,
  dependenciesOf,
  durationMs,
  headroomProcessesOf,
  healthcheckTarget,
  readCompose,
  serviceEnv,
  type ComposeService,
} from './compose-file';
import { readStages } from './dockerfile';
import { listenHost, listenPorts, numericOption, optionValue, repoRoot, settingProblems, type HeadroomProcess } from './headroom-process';

const compose = readCompose();
const services = Object.entries(compose.services);

const headroomProcesses = headroomProcessesOf(compose);
const processOf = (name: string): HeadroomProcess => {
  const found = headroomProcesses.get(name);
  assert.ok(found, `a compose service ${name} built from the Dockerfile`);
  return found;
};

/** The ports a service listens on: Headroom's from its settings, the others' as the file states. */
function portsOf(name: string, service: ComposeService): number[] {
  const headroom = headroomProcesses.get(name);
  return headroom ? listenPorts(headroom) : containerPorts(service);
}

/** host:port of every address in a setting: URLs (redis://redis:6379) and HOST:PORT values. */
function addressesIn(value: string): { host: string; port: number | undefined }[] {
  const url = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/]*@)?([^/:?]+)(?::(\d+))?/.exec(value);
  if (url) return [{ host: url[1]!, port: url[2] === undefined ? undefined : Number(url[2]) }];
  const hostPort = /^([a-z][a-z0-9-]*):(\d+)$/.exec(value);
  return hostPort ? [{ host: hostPort[1]!, port: Number(hostPort[2]) }] : [];
}

test('every service has an image or the root Dockerfile as its build, and a restart policy', () => {
  const stageNames = readStages().map((stage) => stage.name);
  for (const [name, service] of services) {
    assert.ok(service.restart ?? service.deploy?.restart_policy, `${name}: a restart policy`);
    if (service.build === undefined) {
      assert.match(service.image ?? '', /^[\w./-]+:[\w.-]+$/, `${name}: an image with a pinned tag`);
      continue;
    }
    const build = typeof service.build === 'string' ? { context: service.build } : service.build;
    const context = path.resolve(repoRoot, build.context ?? '.');
    assert.equal(context, repoRoot, `${name}: built from the repository root`);
    assert.ok(fs.existsSync(path.join(context, build.dockerfile ?? 'Dockerfile')), `${name}: its Dockerfile exists`);
    assert.ok(
      build.target === undefined || stageNames.includes(build.target),
      `${name}: target ${build.target} is a stage of the Dockerfile (${stageNames.join(', ')})`,
    );
  }
});

test('depends_on names services that exist, and waits for health checks they have', () => {
  for (const [name, service] of services) {
    for (const [dependency, condition] of Object.entries(dependenciesOf(service))) {
      const target = compose.services[dependency];
      assert.ok(target, `${name} depends on ${dependency}, which is not a service`);
      assert.equal(condition, 'service_healthy', `${name} waits for ${dependency} to be healthy, not merely started`);
      assert.ok(target.healthcheck?.test && !target.healthcheck.disable, `${name} waits for ${dependency}'s health check: it has none`);
    }
  }
});

test('each Headroom service runs a built CLI with only flags and env variables it reads (from its --help)', () => {
  assert.deepEqual([...headroomProcesses.keys()].sort(), ['balancer', 'bank-sim', 'control-plane', 'loadgen', 'worker-baseline', 'worker-candidate']);
  // Built first: a CLI that is missing is named here, not deep in another assertion.
  const missing = [...headroomProcesses.values()].filter((p) => !fs.existsSync(path.join(repoRoot, p.script)));
  assert.deepEqual(
    missing.map((p) => `${p.where}: ${p.script} does not exist (not built, or not written yet)`),
    [],
  );
  const problems = [...headroomProcesses.values()].flatMap(settingProblems);
  assert.deepEqual(problems, []);
});

test('each service listening on a port exposes exactly those ports, on 0.0.0.0, and has a health check on one', () => {
  for (const [name, service] of services) {
    const ports = portsOf(name, service);
    const headroom = headroomProcesses.get(name);
    if (headroom) {
      assert.deepEqual(containerPorts(service), ports, `${name}: the ports it publishes or exposes are those it listens on (${headroom.script})`);
      if (ports.length > 0) assert.equal(listenHost(headroom), '0.0.0.0', `${name}: listens on every interface of the container`);
    }
    if (ports.length === 0) continue;
    assert.ok(service.healthcheck?.test, `${name}: a health check`);
    // redis-cli ping and pg_isready name no port; an HTTP check does.
    const health = healthcheckTarget(service);
    if (headroom) assert.ok(health, `${name}: a health check on one of its ports (${ports.join(', ')})`);
    if (health) assert.ok(ports.includes(health.port), `${name}: its health check asks port ${health.port}, it listens on ${ports.join(', ')}`);
  }
  // The checks that ask a Headroom process for more than an answer.
  assert.equal(healthcheckTarget(compose.services['control-plane']!)?.path, '/api/v1/readyz');
  for (const name of ['balancer', 'worker-baseline', 'worker-candidate']) assert.equal(healthcheckTarget(compose.services[name]!)?.path, '/metrics', name);
});

test('addresses in settings name a service, a port it listens on, and a dependency', () => {
  let checked = 0;
  for (const [name, service] of services) {
    for (const [variable, value] of Object.entries(serviceEnv(service))) {
      for (const { host, port } of addressesIn(value)) {
        const target = compose.services[host];
        assert.ok(target, `${name} ${variable}=${value}: ${host} is not a service`);
        if (port !== undefined)
          assert.ok(portsOf(host, target).includes(port), `${name} ${variable}=${value}: ${host} listens on ${portsOf(host, target).join(', ')}`);
        assert.ok(host in dependenciesOf(service), `${name} ${variable}=${value}: ${name} should depend on ${host}`);
        checked++;
      }
    }
  }
  assert.ok(checked >= 10, `only ${checked} addresses found`);
  // What the processes are pointed at.
  for (const [name, p] of headroomProcesses) {
    if (p.script.startsWith('sim/')) continue;
    for (const [flag, host] of [
      ['redis-url', 'redis'],
      ['unleash-url', 'unleash'],
    ] as const) {
      const value = optionValue(p, flag);
      assert.ok(value && addressesIn(value)[0]?.host === host, `${name}: --${flag} points at the ${host} service (${value})`);
    }
  }
  assert.equal(optionValue(processOf('loadgen'), 'balancer'), 'balancer:7700');
});

test('Unleash: the tested version, settings it reads, the postgres service as its database, the tokens the processes use', () => {
  const unleash = compose.services.unleash!;
  const tested = (JSON.parse(fs.readFileSync(path.join(repoRoot, 'node_modules', 'unleash-server', 'package.json'), 'utf8')) as { version: string }).version;
  const [major, minor] = tested.split('.');
  assert.match(
    unleash.image ?? '',
    new RegExp(`^unleashorg/unleash-server:${major}\\.${minor}(\\.|$)`),
    `the image of unleash-server ${tested}, which the tests run`,
  );

  // Every variable is one unleash-server's create-config reads.
  const createConfig = fs.readFileSync(path.join(repoRoot, 'node_modules', 'unleash-server', 'dist', 'lib', 'create-config.js'), 'utf8');
  const env = serviceEnv(unleash);
  for (const name of Object.keys(env)) assert.match(createConfig, new RegExp(`process\\.env\\.${name}\\b`), `unleash-server ${tested} reads no ${name}`);

  const database = new URL(env.DATABASE_URL!);
  const postgres = serviceEnv(compose.services.postgres!);
  assert.equal(database.hostname, 'postgres');
  assert.equal(Number(database.port || 5432), 5432);
  assert.equal(decodeURIComponent(database.username), postgres.POSTGRES_USER);
  assert.equal(decodeURIComponent(database.password), postgres.POSTGRES_PASSWORD);
  assert.equal(database.pathname.slice(1), postgres.POSTGRES_DB);
  assert.ok('postgres' in dependenciesOf(unleash));
  assert.deepEqual(healthcheckTarget(unleash), { port: 4242, path: '/health' });

  // The control plane's admin token and the balancers' and workers' client token are created at
  // Unleash's first start; the client token is one of the environment the control plane writes.
  const adminTokens = env.INIT_ADMIN_API_TOKENS!.split(/,\s?/);
  const clientTokens = (env.INIT_BACKEND_API_TOKENS ?? env.INIT_CLIENT_API_TOKENS ?? '').split(/,\s?/);
  const controlPlane = processOf('control-plane');
  assert.ok(adminTokens.includes(optionValue(controlPlane, 'unleash-admin-token') ?? ''), 'the control plane uses an admin token Unleash creates');
  const environment = optionValue(controlPlane, 'unleash-environment') ?? 'development';
  for (const name of ['balancer', 'worker-baseline', 'worker-candidate']) {
    const token = optionValue(processOf(name), 'unleash-client-token') ?? '';
    assert.ok(clientTokens.includes(token), `${name} uses a client token Unleash creates`);
    assert.match(token, new RegExp(`^[^:]+:${environment}\\.`), `${name}'s token reads the environment the control plane writes (${environment})`);
  }
});

test('worker clusters: worker-<cluster>, several replicas each, their own address, a drain that ends before Docker kills', () => {
  const balancer = processOf('balancer');
  const maxTaskTimeoutMs = numericOption(balancer, 'max-task-timeout-ms')!;
  for (const cluster of ['baseline', 'candidate']) {
    const name = `worker-${cluster}`;
    const service = compose.services[name]!;
    const worker = processOf(name);
    assert.equal(worker.script, 'worker/dist/src/cli.js');
    // prometheus.yml takes a worker's cluster label from its service name.
    assert.equal(optionValue(worker, 'cluster'), cluster, `${name}: --cluster`);
    assert.ok((service.deploy?.replicas ?? 1) >= 2, `${name}: replicas`);
    // Replicas share every setting in the file: each must find its own address at start.
    assert.ok(
      'HEADROOM_ADVERTISE_HOST' in worker.env && worker.env.HEADROOM_ADVERTISE_HOST === undefined,
      `${name}: advertises an address found in the container`,
    );
    const drainTimeoutMs = numericOption(worker, 'drain-timeout-ms')!;
    assert.ok(
      service.stop_grace_period && durationMs(service.stop_grace_period) > drainTimeoutMs,
      `${name}: stop_grace_period ${service.stop_grace_period} exceeds the drain timeout ${drainTimeoutMs} ms`,
    );
    assert.ok(
      drainTimeoutMs >= maxTaskTimeoutMs,
      `${name}: a drain (${drainTimeoutMs} ms) lets the longest task the balancers accept (${maxTaskTimeoutMs} ms) finish`,
    );
    assert.ok(service.init, `${name}: an init process passes SIGTERM on and reaps the worker's child`);
  }
  const parallelism = (name: string) => numericOption(processOf(name), 'max-parallelism')!;
  assert.equal(parallelism('worker-baseline'), 1);
  assert.ok(parallelism('worker-candidate') > 1);
});

test('two balancers, whose dispatched tasks end before Docker kills them', () => {
  const service = compose.services.balancer!;
  assert.equal(service.deploy?.replicas, 2);
  const maxTaskTimeoutMs = numericOption(processOf('balancer'), 'max-task-timeout-ms')!;
  assert.ok(
    service.stop_grace_period && durationMs(service.stop_grace_period) > maxTaskTimeoutMs,
    `balancer: stop_grace_period ${service.stop_grace_period} exceeds the longest task (${maxTaskTimeoutMs} ms)`,
  );
  const balancers = [...headroomProcesses.values()].filter((p) => p.script === 'balancer/dist/src/cli.js');
  assert.equal(balancers.length, 1, 'one balancer service, scaled: prometheus.yml looks up one name');
});

test('the load generator sends the integrations the control plane shares out', () => {
  assert.equal(optionValue(processOf('loadgen'), 'integrations'), optionValue(processOf('control-plane'), 'integrations'));
});

test('Prometheus loads deploy/prometheus and finds every scrape target among the services, on its port', () => {
  const prometheus = compose.services.prometheus!;
  const mounts = bindMounts(prometheus);
  const config = commandOf(prometheus)
    .find((arg) => arg.startsWith('--config.file='))
    ?.slice('--config.file='.length);
  assert.ok(config, 'prometheus: --config.file');
  // The config and the rule files it names (relative to it) must be in the container.
  const inContainer = (file: string) => {
    const mount = mounts.find(({ target }) => file === target || file.startsWith(`${target}/`));
    return mount && path.join(mount.source, path.relative(mount.target, file));
  };
  assert.equal(inContainer(config), path.join(prometheusDir, 'prometheus.yml'));
  for (const rules of ruleFilePaths()) {
    const hostFile = inContainer(path.posix.join(path.posix.dirname(config), path.relative(prometheusDir, rules)));
    assert.ok(hostFile && fs.existsSync(hostFile), `prometheus: rule file ${path.basename(rules)} is mounted`);
  }

  for (const job of readPrometheusConfig().scrape_configs) {
    for (const sd of job.dns_sd_configs ?? []) {
      for (const name of sd.names) {
        const service = compose.services[name];
        assert.ok(service, `prometheus.yml job ${job.job_name} looks up ${name}: no such service`);
        assert.ok(
          sd.port !== undefined && portsOf(name, service).includes(sd.port),
          `job ${job.job_name}: ${name} listens on ${portsOf(name, service).join(', ')}, not ${sd.port}`,
        );
        const headroom = processOf(name);
        const servesPath = job.metrics_path === '/metrics' ? optionValue(headroom, 'metrics-port') !== undefined : headroom.script.startsWith('control-plane/');
        assert.ok(servesPath, `job ${job.job_name}: ${name} serves ${job.metrics_path} on ${sd.port}`);
      }
    }
  }
});

test('Grafana mounts the provisioning and the dashboards where the provisioning says, and reaches Prometheus', () => {
  const mounts = bindMounts(compose.services.grafana!);
  const provisioning = mounts.find(({ target }) => target === '/etc/grafana/provisioning');
  assert.equal(provisioning?.source, path.dirname(path.dirname(datasourcesPath)));
  const { providers } = readYaml(dashboardProvidersPath) as { providers: { options: { path: string } }[] };
  for (const provider of providers) {
    const dashboards = mounts.find(({ target }) => target === provider.options.path);
    assert.ok(dashboards && fs.readdirSync(dashboards.source).some((file) => file.endsWith('.json')), `a folder of dashboards at ${provider.options.path}`);
  }
  for (const { source } of mounts) assert.ok(fs.existsSync(source), `${source} exists`);

  const { datasources } = readYaml(datasourcesPath) as { datasources: { url: string }[] };
  for (const { url } of datasources) {
    const { hostname, port } = new URL(url);
    const service = compose.services[hostname];
    assert.ok(service && containerPorts(service).includes(Number(port)), `the datasource ${url} is a service and port`);
    assert.ok(hostname in dependenciesOf(compose.services.grafana!), `grafana depends on ${hostname}`);
  }
});

test("the control plane keeps its audit log in the stack's PostgreSQL, in a schema of its own, and waits for it", () => {
  const controlPlane = compose.services['control-plane']!;
  const env = serviceEnv(controlPlane);
  const postgres = serviceEnv(compose.services.postgres!);
  assert.ok(env.HEADROOM_DATABASE_URL, 'HEADROOM_DATABASE_URL is set');
  const database = new URL(env.HEADROOM_DATABASE_URL);
  assert.match(database.protocol, /^postgres(ql)?:$/);
  assert.equal(database.hostname, 'postgres');
  assert.equal(Number(database.port || 5432), 5432);
  assert.equal(decodeURIComponent(database.username), postgres.POSTGRES_USER);
  assert.equal(decodeURIComponent(database.password), postgres.POSTGRES_PASSWORD);
  assert.equal(database.pathname.slice(1), postgres.POSTGRES_DB);
  // Unleash keeps its tables in public: the control plane's schema must be another.
  assert.match(env.HEADROOM_DATABASE_SCHEMA ?? 'headroom', /^[a-z_][a-z0-9_]*$/);
  assert.notEqual(env.HEADROOM_DATABASE_SCHEMA ?? 'headroom', 'public');
  assert.equal(dependenciesOf(controlPlane).postgres, 'service_healthy');
});
