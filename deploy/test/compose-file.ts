/**
 * docker-compose.yml as `docker compose` reads it: YAML with merge keys, then `${VAR:-default}`
 * interpolation (with an empty environment, so the defaults the file states), and the shapes
 * its services take, normalised for the tests.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { parseCommand, repoRoot, type HeadroomProcess } from './headroom-process';

export const composePath = path.join(repoRoot, 'docker-compose.yml');

export interface ComposeService {
  image?: string;
  build?: string | { context?: string; dockerfile?: string; target?: string };
  command?: string | string[];
  entrypoint?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  ports?: (string | number | { target: number })[];
  expose?: (string | number)[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[]; disable?: boolean };
  restart?: string;
  deploy?: { replicas?: number; restart_policy?: { condition?: string } };
  volumes?: (string | { type?: string; source?: string; target: string; read_only?: boolean })[];
  stop_grace_period?: string;
  init?: boolean;
}

export interface ComposeFile {
  services: Record<string, ComposeService>;
  volumes?: Record<string, unknown>;
}

/** Compose's interpolation of one string: `$$` is a `$`; every variable must have a default. */
export function interpolate(value: string, where: string): string {
  return value.replace(
    /\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (whole, braced?: string, operator?: string, fallback?: string, bare?: string) => {
      if (whole === '$$') return '$';
      if (operator === undefined)
        throw new Error(`${where}: ${whole} has no default: \`docker compose up\` would need it set (write \${${braced ?? bare}:-default})`);
      return fallback ?? '';
    },
  );
}

function interpolateAll(node: unknown, where: string): unknown {
  if (typeof node === 'string') return interpolate(node, where);
  if (Array.isArray(node)) return node.map((item, i) => interpolateAll(item, `${where}[${i}]`));
  if (node && typeof node === 'object') return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, interpolateAll(value, `${where}.${key}`)]));
  return node;
}

export function readCompose(): ComposeFile {
  const raw = parseYaml(fs.readFileSync(composePath, 'utf8'), { merge: true }) as ComposeFile;
  return interpolateAll(raw, 'docker-compose.yml') as ComposeFile;
}

export function serviceEnv(service: ComposeService): Record<string, string> {
  const environment = service.environment ?? {};
  if (Array.isArray(environment)) {
    return Object.fromEntries(environment.map((entry) => [entry.split('=')[0]!, entry.slice(entry.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(environment).map(([name, value]) => [name, value === null ? '' : String(value)]));
}

export function commandOf(service: ComposeService): string[] {
  const { command = [] } = service;
  return typeof command === 'string' ? command.split(/\s+/).filter(Boolean) : command;
}

/** Container ports a service publishes (`ports`) or exposes to the other services (`expose`). */
export function containerPorts(service: ComposeService): number[] {
  const published = (service.ports ?? []).map((port) => {
    if (typeof port === 'object') return port.target;
    // "7700", "8080:8080", "7700-7701:7700", "127.0.0.1:8080:8080", "9090/tcp"
    return Number(String(port).split('/')[0]!.split(':').at(-1));
  });
  const exposed = (service.expose ?? []).map((port) => Number(String(port).split('/')[0]));
  return [...new Set([...published, ...exposed])].sort((a, b) => a - b);
}

export function dependenciesOf(service: ComposeService): Record<string, string> {
  const { depends_on: dependsOn = {} } = service;
  if (Array.isArray(dependsOn)) return Object.fromEntries(dependsOn.map((name) => [name, 'service_started']));
  return Object.fromEntries(Object.entries(dependsOn).map(([name, { condition = 'service_started' }]) => [name, condition]));
}

/** A compose duration ("75s", "1m30s", "500ms") in milliseconds. */
export function durationMs(duration: string): number {
  const units: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001 };
  const parts = [...duration.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us)/g)];
  if (parts.length === 0 || parts.map(([whole]) => whole).join('') !== duration) throw new Error(`not a compose duration: ${duration}`);
  return parts.reduce((sum, [, amount, unit]) => sum + Number(amount) * units[unit!]!, 0);
}

/** Bind mounts: host path (absolute) -> container path. */
export function bindMounts(service: ComposeService): { source: string; target: string }[] {
  return (service.volumes ?? []).flatMap((volume) => {
    const [source, target] = typeof volume === 'string' ? volume.split(':') : [volume.source, volume.target];
    if (!source || !target || !/^[./]/.test(source)) return []; // a named volume
    return [{ source: path.resolve(repoRoot, source), target }];
  });
}

/** The port a health check asks for at 127.0.0.1 / localhost, and its path. */
export function healthcheckTarget(service: ComposeService): { port: number; path: string } | undefined {
  const test = service.healthcheck?.test;
  const text = Array.isArray(test) ? test.join(' ') : (test ?? '');
  const match = /(?:127\.0\.0\.1|localhost):(\d+)(\/[^\s'"]*)?/.exec(text);
  return match ? { port: Number(match[1]), path: match[2] ?? '/' } : undefined;
}

/** The services built from the root Dockerfile, as Headroom processes, by service name. */
export function headroomProcessesOf(compose: ComposeFile): Map<string, HeadroomProcess> {
  return new Map(
    Object.entries(compose.services)
      .filter(([, service]) => service.build !== undefined)
      .map(([name, service]) => [name, parseCommand(`compose service ${name}`, commandOf(service), serviceEnv(service))]),
  );
}
