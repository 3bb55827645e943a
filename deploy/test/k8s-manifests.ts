/**
 * deploy/k8s/ as the tests read it: every document of every manifest, and the shapes of the
 * kinds Headroom uses, as far as the tests look into them.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { deployDir } from './artefacts';
import { parseCommand, type HeadroomProcess } from './headroom-process';

export const k8sDir = path.join(deployDir, 'k8s');
export const kustomizationPath = path.join(k8sDir, 'kustomization.yaml');
export const exampleSecretPath = path.join(k8sDir, 'secret.example.yaml');

export interface Metadata {
  name: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}

export interface Probe {
  httpGet?: { path: string; port: number | string };
  tcpSocket?: { port: number | string };
  grpc?: { port: number; service?: string };
  exec?: { command: string[] };
}

export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  envFrom?: unknown[];
  ports?: { name?: string; containerPort: number }[];
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; runAsNonRoot?: boolean; runAsUser?: number };
}

export interface PodSpec {
  containers: Container[];
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number };
}

export interface Deployment {
  kind: 'Deployment';
  metadata: Metadata;
  spec: { replicas?: number; selector: { matchLabels: Record<string, string> }; template: { metadata: Metadata & { name?: string }; spec: PodSpec } };
}

export interface Service {
  kind: 'Service';
  metadata: Metadata;
  spec: { clusterIP?: string; selector: Record<string, string>; ports: { name?: string; port: number; targetPort?: number | string }[] };
}

export interface PodDisruptionBudget {
  kind: 'PodDisruptionBudget';
  metadata: Metadata;
  spec: { minAvailable?: number | string; maxUnavailable?: number | string; selector: { matchLabels: Record<string, string> } };
}

export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: Metadata;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  [key: string]: unknown;
}

export function readManifests(file: string): Manifest[] {
  const text = fs.readFileSync(file, 'utf8');
  return parseAllDocuments(text).flatMap((document) => {
    if (document.errors.length > 0) throw new Error(`${path.basename(file)}: ${document.errors.map((e) => e.message).join('; ')}`);
    const value = document.toJS() as Manifest | null;
    return value ? [value] : [];
  });
}

export function readKustomization(): { namespace?: string; resources: string[]; images?: { name: string; newName?: string; newTag?: string }[] } {
  const [kustomization] = readManifests(kustomizationPath) as unknown as { namespace?: string; resources: string[] }[];
  return kustomization!;
}

/** Every resource kustomization.yaml applies. */
export function appliedManifests(): Manifest[] {
  return readKustomization().resources.flatMap((resource) => readManifests(path.join(k8sDir, resource)));
}

export const ofKind = <T>(manifests: Manifest[], kind: string): T[] => manifests.filter((m) => m.kind === kind) as unknown as T[];

export function selects(selector: Record<string, string>, labels: Record<string, string> = {}): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

/** A container as a Headroom process; env from a ConfigMap is resolved, from a Secret or a field it is not. */
export function containerProcess(deployment: Deployment, container: Container, configMaps: Map<string, Record<string, string>>): HeadroomProcess {
  const env: HeadroomProcess['env'] = {};
  for (const variable of container.env ?? []) {
    const fromConfigMap = variable.valueFrom?.configMapKeyRef;
    env[variable.name] = fromConfigMap ? configMaps.get(fromConfigMap.name)?.[fromConfigMap.key] : variable.value;
  }
  const where = `Deployment ${deployment.metadata.name} container ${container.name}`;
  return parseCommand(where, [...(container.command ?? []), ...(container.args ?? [])], env);
}

export interface HeadroomContainer {
  deployment: Deployment;
  container: Container;
  process: HeadroomProcess;
}

/** Every container of the applied Deployments that runs the Headroom image. */
export function headroomContainers(manifests: Manifest[] = appliedManifests()): HeadroomContainer[] {
  const configMaps = new Map(ofKind<Manifest>(manifests, 'ConfigMap').map((m) => [m.metadata.name, m.data ?? {}]));
  return ofKind<Deployment>(manifests, 'Deployment').flatMap((deployment) =>
    deployment.spec.template.spec.containers
      .filter((container) => container.image.split(':')[0] === headroomImage)
      .map((container) => ({ deployment, container, process: containerProcess(deployment, container, configMaps) })),
  );
}

/** The image name the manifests use for the root Dockerfile's image (kustomization.yaml sets registry and tag). */
export const headroomImage = 'headroom';
