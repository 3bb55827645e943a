/**
 * deploy/k8s/, checked without a cluster: every manifest parsed, and compared with the code
 * (each CLI's `--help`, read now), the Dockerfile, prometheus.yml and with each other.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readPrometheusConfig } from './artefacts';
import { readStages } from './dockerfile';
import { isSet, listenHost, listenPorts, numericOption, optionValue, repoRoot, settingProblems } from './headroom-process';
import {
  appliedManifests,
  exampleSecretPath,
  headroomContainers,
  headroomImage,
  k8sDir,
  ofKind,
  readKustomization,
  readManifests,
  selects,
  type Container,
  type Deployment,
  type HeadroomContainer,
  type Manifest,
  type PodDisruptionBudget,
  type Probe,
  type Service,
} from './k8s-manifests';

const manifests = appliedManifests();
const deployments = ofKind<Deployment>(manifests, 'Deployment');
const services = ofKind<Service>(manifests, 'Service');
const budgets = ofKind<PodDisruptionBudget>(manifests, 'PodDisruptionBudget');
const configMaps = new Map(ofKind<Manifest>(manifests, 'ConfigMap').map((m) => [m.metadata.name, m.data ?? {}]));
const exampleSecrets = new Map(readManifests(exampleSecretPath).map((m) => [m.metadata.name, { ...m.data, ...m.stringData }]));
const containers = headroomContainers(manifests);

function headroomContainer(deployment: string): HeadroomContainer {
  const found = containers.find((c) => c.deployment.metadata.name === deployment);
  assert.ok(found, `a Deployment ${deployment} running the ${headroomImage} image`);
  return found;
}

const podLabels = (deployment: Deployment) => deployment.spec.template.metadata.labels ?? {};
const selectedDeployments = (selector: Record<string, string>) => deployments.filter((d) => selects(selector, podLabels(d)));

function probePort(container: Container, probe: Probe): number | undefined {
  const port = probe.httpGet?.port ?? probe.tcpSocket?.port ?? probe.grpc?.port;
  return typeof port === 'string' ? container.ports?.find((p) => p.name === port)?.containerPort : port;
}

const graceMs = (deployment: Deployment) => (deployment.spec.template.spec.terminationGracePeriodSeconds ?? 30) * 1000;

const mebibytes = (quantity: string | undefined): number | undefined => {
  const match = /^(\d+)(Mi|Gi)$/.exec(quantity ?? '');
  return match ? Number(match[1]) * (match[2] === 'Gi' ? 1024 : 1) : undefined;
};

test('kustomization.yaml applies every manifest of deploy/k8s but the example Secret, in one namespace, and sets the image', () => {
  const files = fs.readdirSync(k8sDir).filter((file) => file.endsWith('.yaml') && !['kustomization.yaml', path.basename(exampleSecretPath)].includes(file));
  const kustomization = readKustomization();
  assert.deepEqual([...kustomization.resources].sort(), files.sort());
  assert.ok(
    kustomization.images?.some((image) => image.name === headroomImage && image.newTag),
    `kustomization images: ${headroomImage} with a tag`,
  );
  const namespaces = ofKind<Manifest>(manifests, 'Namespace').map((m) => m.metadata.name);
  assert.deepEqual(namespaces, [kustomization.namespace]);
  for (const secret of readManifests(exampleSecretPath))
    assert.equal(secret.metadata.namespace, kustomization.namespace, 'the example Secret goes to the same namespace');
  const keys = manifests.map((m) => `${m.kind}/${m.metadata.name}`);
  assert.equal(new Set(keys).size, keys.length, `names are unique per kind: ${keys.join(', ')}`);
});

test('Deployments for the control plane, the balancers and both worker clusters, each selecting its own pods, each behind a Service', () => {
  assert.deepEqual(deployments.map((d) => d.metadata.name).sort(), ['balancer', 'control-plane', 'worker-baseline', 'worker-candidate']);
  for (const deployment of deployments) {
    const name = deployment.metadata.name;
    assert.ok(selects(deployment.spec.selector.matchLabels, podLabels(deployment)), `${name}: its selector matches its pods`);
    assert.deepEqual(
      selectedDeployments(deployment.spec.selector.matchLabels).map((d) => d.metadata.name),
      [name],
      `${name}: its selector matches no other Deployment's pods`,
    );
    const service = services.find((s) => s.metadata.name === name);
    assert.ok(service, `a Service ${name}`);
    assert.deepEqual(
      selectedDeployments(service.spec.selector).map((d) => d.metadata.name),
      [name],
      `Service ${name} selects the pods of Deployment ${name}`,
    );
    const ports = deployment.spec.template.spec.containers.flatMap((c) => c.ports ?? []);
    for (const port of service.spec.ports) {
      const target = ports.find((p) => (typeof port.targetPort === 'string' ? p.name === port.targetPort : p.containerPort === (port.targetPort ?? port.port)));
      assert.ok(target, `Service ${name} port ${port.name}: a container port ${port.targetPort}`);
      assert.equal(port.port, target.containerPort, `Service ${name} port ${port.name}: the same number as the container's`);
    }
  }
});

test('each container runs a built CLI with only settings it reads (from its --help), from ConfigMap and Secret keys that exist', () => {
  assert.equal(containers.length, deployments.length, 'every Deployment runs the Headroom image');
  assert.deepEqual(
    containers.flatMap(({ process }) => settingProblems(process)),
    [],
  );
  for (const { process, container } of containers) {
    assert.equal(container.envFrom, undefined, `${process.where}: env listed name by name, so that each is checked`);
    for (const variable of container.env ?? []) {
      const { configMapKeyRef, secretKeyRef, fieldRef } = variable.valueFrom ?? {};
      if (configMapKeyRef)
        assert.ok(
          configMaps.get(configMapKeyRef.name)?.[configMapKeyRef.key] !== undefined,
          `${process.where} ${variable.name}: ConfigMap ${configMapKeyRef.name} has ${configMapKeyRef.key}`,
        );
      if (secretKeyRef)
        assert.ok(
          exampleSecrets.get(secretKeyRef.name)?.[secretKeyRef.key] !== undefined,
          `${process.where} ${variable.name}: secret.example.yaml's ${secretKeyRef.name} has ${secretKeyRef.key}`,
        );
      if (fieldRef) assert.ok(['status.podIP', 'metadata.name'].includes(fieldRef.fieldPath), `${process.where} ${variable.name}: ${fieldRef.fieldPath}`);
      if (!variable.valueFrom) assert.equal(typeof variable.value, 'string', `${process.where} ${variable.name}: a string value (quote numbers)`);
    }
  }
});

test('each container declares the ports it listens on, on 0.0.0.0, and has a readiness probe on one of them', () => {
  const proto = fs.readFileSync(path.join(repoRoot, 'proto', 'headroom', 'v1', 'headroom.proto'), 'utf8');
  const protoPackage = /^package ([\w.]+);/m.exec(proto)?.[1];
  const controlPlaneApp = fs.readFileSync(path.join(repoRoot, 'control-plane', 'dist', 'src', 'app.js'), 'utf8');
  for (const { process, container } of containers) {
    const ports = listenPorts(process);
    assert.deepEqual(
      (container.ports ?? []).map((p) => p.containerPort).sort((a, b) => a - b),
      ports,
      `${process.where}: container ports`,
    );
    assert.equal(listenHost(process), '0.0.0.0', `${process.where}: listens on the pod's address`);
    assert.ok(container.readinessProbe, `${process.where}: a readiness probe`);
    for (const [kind, probe] of Object.entries({ readiness: container.readinessProbe, liveness: container.livenessProbe, startup: container.startupProbe })) {
      if (!probe) continue;
      const port = probePort(container, probe);
      assert.ok(port !== undefined && ports.includes(port), `${process.where}: the ${kind} probe asks port ${port}, it listens on ${ports.join(', ')}`);
      if (probe.grpc) {
        // The gRPC health service answers per service name: headroom.v1.Balancer, headroom.v1.Worker.
        const [pkg, service] = [probe.grpc.service?.replace(/\.\w+$/, ''), probe.grpc.service?.split('.').at(-1)];
        assert.equal(pkg, protoPackage, `${process.where}: ${kind} probe service ${probe.grpc.service}`);
        assert.match(proto, new RegExp(`^service ${service} \\{`, 'm'), `${process.where}: ${kind} probe service ${probe.grpc.service}`);
        assert.equal(port, numericOption(process, 'port'), `${process.where}: the gRPC probe asks the gRPC port`);
        assert.ok(process.script.startsWith(`${service!.toLowerCase()}/`), `${process.where}: ${process.script} serves ${probe.grpc.service}`);
      }
      if (probe.httpGet?.path === '/metrics') assert.equal(port, numericOption(process, 'metrics-port'), `${process.where}: /metrics is on the metrics port`);
      else if (probe.httpGet)
        assert.ok(
          controlPlaneApp.includes(`'${probe.httpGet.path}'`) && process.script.startsWith('control-plane/'),
          `${process.where}: the control plane serves ${probe.httpGet.path}`,
        );
    }
  }
  // The control plane waits for readyz (Unleash answers, flags exist) once, then keeps serving
  // through an Unleash outage: rollbacks go through Redis.
  const controlPlane = headroomContainer('control-plane').container;
  assert.equal(controlPlane.startupProbe?.httpGet?.path, '/api/v1/readyz');
  assert.equal(controlPlane.readinessProbe?.httpGet?.path, '/api/v1/healthz');
});

test('workers: a PodDisruptionBudget per cluster, a drain that ends within terminationGracePeriodSeconds, the pod IP advertised', () => {
  const maxTaskTimeoutMs = numericOption(headroomContainer('balancer').process, 'max-task-timeout-ms')!;
  for (const cluster of ['baseline', 'candidate']) {
    const { deployment, container, process } = headroomContainer(`worker-${cluster}`);
    const name = deployment.metadata.name;
    assert.equal(process.script, 'worker/dist/src/cli.js');
    assert.equal(optionValue(process, 'cluster'), cluster, `${name}: --cluster (prometheus.yml takes the cluster from the name)`);
    assert.ok((deployment.spec.replicas ?? 1) >= 2, `${name}: replicas`);

    const budget = budgets.filter((b) => selects(b.spec.selector.matchLabels, podLabels(deployment)));
    assert.equal(budget.length, 1, `${name}: one PodDisruptionBudget`);
    assert.deepEqual(
      selectedDeployments(budget[0]!.spec.selector.matchLabels).map((d) => d.metadata.name),
      [name],
      `${name}: its budget counts its pods only`,
    );
    const { maxUnavailable, minAvailable } = budget[0]!.spec;
    assert.ok(
      maxUnavailable !== undefined ? Number(maxUnavailable) >= 1 : Number(minAvailable) < (deployment.spec.replicas ?? 1),
      `${name}: the budget lets a node drain (one pod at a time)`,
    );

    const drainTimeoutMs = numericOption(process, 'drain-timeout-ms')!;
    assert.ok(
      graceMs(deployment) > drainTimeoutMs,
      `${name}: terminationGracePeriodSeconds ${graceMs(deployment) / 1000} exceeds the drain timeout ${drainTimeoutMs} ms`,
    );
    assert.ok(
      drainTimeoutMs >= maxTaskTimeoutMs,
      `${name}: a drain (${drainTimeoutMs} ms) lets the longest task the balancers accept (${maxTaskTimeoutMs} ms) finish`,
    );

    const advertise = container.env?.find((v) => v.name === 'HEADROOM_ADVERTISE_HOST');
    assert.equal(advertise?.valueFrom?.fieldRef?.fieldPath, 'status.podIP', `${name}: advertises its pod IP`);

    // V8's heap (old space + 3 semi-spaces) fits under the memory limit, with room for the rest.
    const limitMb = mebibytes(container.resources?.limits?.memory);
    const heapMb = (numericOption(process, 'max-old-space-size-mb') ?? NaN) + 3 * (numericOption(process, 'max-semi-space-size-mb') ?? 16);
    assert.ok(limitMb !== undefined && heapMb < limitMb * 0.9, `${name}: V8 heap ${heapMb} MiB under the memory limit ${limitMb} MiB`);
  }
  assert.equal(numericOption(headroomContainer('worker-baseline').process, 'max-parallelism'), 1);
  assert.ok(numericOption(headroomContainer('worker-candidate').process, 'max-parallelism')! > 1);
});

test('balancers: several, and the tasks they dispatched end within terminationGracePeriodSeconds', () => {
  const { deployment, process } = headroomContainer('balancer');
  assert.ok((deployment.spec.replicas ?? 1) >= 2);
  const maxTaskTimeoutMs = numericOption(process, 'max-task-timeout-ms')!;
  assert.ok(
    graceMs(deployment) > maxTaskTimeoutMs,
    `balancer: terminationGracePeriodSeconds ${graceMs(deployment) / 1000} exceeds the longest task (${maxTaskTimeoutMs} ms)`,
  );
  assert.ok(
    budgets.some((b) => selects(b.spec.selector.matchLabels, podLabels(deployment))),
    'a PodDisruptionBudget keeps a balancer up',
  );
});

test('Redis and Unleash are external: nothing here runs them, every process gets their addresses from the ConfigMap or the Secret', () => {
  const images = manifests.flatMap((m) => ((m as unknown as Deployment).spec?.template?.spec?.containers ?? []).map((c) => c.image));
  for (const image of images) assert.doesNotMatch(image, /redis|unleash|postgres/, `${image}: an external service run here`);
  assert.deepEqual(ofKind(manifests, 'StatefulSet'), []);
  for (const { process, container } of containers) {
    for (const [flag, variable] of [
      ['redis-url', 'REDIS_URL'],
      ['unleash-url', 'UNLEASH_URL'],
    ] as const) {
      assert.ok(isSet(process, flag), `${process.where}: --${flag} is set (the default is 127.0.0.1)`);
      const from = container.env?.find((v) => v.name === variable)?.valueFrom;
      assert.ok(from?.configMapKeyRef ?? from?.secretKeyRef, `${process.where}: ${variable} from a ConfigMap or a Secret`);
    }
  }
  assert.match(configMaps.get('headroom')?.UNLEASH_URL ?? '', /^https?:\/\//);
  assert.match(exampleSecrets.get('headroom')?.REDIS_URL ?? '', /^rediss?:\/\//);
  // The balancers' and workers' client token reads the environment the control plane writes.
  const environment = configMaps.get('headroom')?.UNLEASH_ENVIRONMENT;
  assert.match(exampleSecrets.get('headroom')?.UNLEASH_CLIENT_TOKEN ?? '', new RegExp(`^[^:]+:${environment}\\.`));
  assert.match(exampleSecrets.get('headroom')?.UNLEASH_ADMIN_TOKEN ?? '', /^\*:\*\./);
});

test("pods run as the image's non-root user, without privilege escalation, on a read-only root filesystem", () => {
  const [user] = readStages().at(-1)!.instructions.at(-1)!.args.split(':');
  for (const { deployment, container, process } of containers) {
    const pod = deployment.spec.template.spec.securityContext;
    assert.equal(pod?.runAsNonRoot, true, `${process.where}: runAsNonRoot`);
    assert.equal(pod?.runAsUser, Number(user), `${process.where}: runAsUser is the Dockerfile's USER`);
    assert.equal(container.securityContext?.allowPrivilegeEscalation, false, process.where);
    assert.equal(container.securityContext?.readOnlyRootFilesystem, true, process.where);
    assert.ok(container.resources?.requests && mebibytes(container.resources.limits?.memory), `${process.where}: requests and a memory limit`);
  }
});

test('Prometheus: pod annotations name the metrics port and path, and the DNS names prometheus.yml looks up are headless Services', () => {
  const jobs = readPrometheusConfig().scrape_configs;
  for (const { deployment, process } of containers) {
    const annotations = deployment.spec.template.metadata.annotations ?? {};
    const port = Number(annotations['prometheus.io/port']);
    const job = jobs.find((j) => (j.dns_sd_configs ?? []).some((sd) => sd.names.includes(deployment.metadata.name)));
    assert.ok(job, `prometheus.yml scrapes ${deployment.metadata.name}`);
    assert.equal(annotations['prometheus.io/scrape'], 'true');
    assert.equal(annotations['prometheus.io/path'], job.metrics_path, `${process.where}: the path prometheus.yml scrapes`);
    assert.equal(
      port,
      job.dns_sd_configs!.find((sd) => sd.names.includes(deployment.metadata.name))!.port,
      `${process.where}: the port prometheus.yml scrapes`,
    );
    assert.ok(listenPorts(process).includes(port), `${process.where}: listens on ${port}`);
  }
  for (const job of jobs) {
    for (const sd of job.dns_sd_configs ?? []) {
      for (const name of sd.names) {
        const service = services.find((s) => s.metadata.name === name);
        assert.ok(service, `prometheus.yml job ${job.job_name} looks up ${name}: a Service of that name`);
        assert.equal(service.spec.clusterIP, 'None', `Service ${name} is headless: its name resolves to every pod`);
        assert.ok(
          service.spec.ports.some((p) => p.port === sd.port),
          `Service ${name} has port ${sd.port}`,
        );
      }
    }
  }
});

test('the control plane gets its PostgreSQL (the audit log) from the Secret and a schema of its own from the ConfigMap', () => {
  const { container } = headroomContainer('control-plane');
  const variable = (name: string) => container.env?.find((v) => v.name === name)?.valueFrom;
  const url = variable('HEADROOM_DATABASE_URL')?.secretKeyRef;
  assert.ok(url, 'HEADROOM_DATABASE_URL from the Secret (it holds a password)');
  assert.match(exampleSecrets.get(url.name)?.[url.key] ?? '', /^postgres(ql)?:\/\/[^@]+@[^/]+\/\w+/);
  const schema = variable('HEADROOM_DATABASE_SCHEMA')?.configMapKeyRef;
  assert.ok(schema, 'HEADROOM_DATABASE_SCHEMA from the ConfigMap');
  const schemaName = configMaps.get(schema.name)?.[schema.key] ?? '';
  assert.match(schemaName, /^[a-z_][a-z0-9_]*$/);
  assert.notEqual(schemaName, 'public', "not Unleash's schema");
  const retention = variable('HEADROOM_AUDIT_RETENTION_DAYS')?.configMapKeyRef;
  assert.ok(retention && Number(configMaps.get(retention.name)?.[retention.key]) >= 1, 'a retention of at least a day');
});
