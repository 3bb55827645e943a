/**
 * Helpers for Headroom's own tests: real Redis, isolated per test. Not used at run time.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { freePort } from '@headroom/common';
import { startPrivateRedis, waitForPort, type PrivateRedis } from './redis-server';

export { freePort };

/** The shared Redis the tests use (REDIS_URL, default redis://127.0.0.1:6379). */
export const testRedisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A key prefix no other test uses, so tests never see each other's keys. */
export function uniquePrefix(name = 't'): string {
  return `test:${name}:${randomBytes(6).toString('hex')}`;
}

export interface SentinelRedis {
  /** `redis+sentinel://` URL of the three sentinels and the primary's name: what Headroom is given. */
  readonly url: string;
  readonly primaryName: string;
  /** The two redis-servers: `nodes[0]` starts as the primary, `nodes[1]` as its replica. */
  readonly nodes: readonly [PrivateRedis, PrivateRedis];
  readonly sentinelPorts: readonly number[];
  /** The sentinels' process ids, in the order of `sentinelPorts` (to pause one with SIGSTOP). */
  readonly sentinelPids: readonly number[];
  /** Sentinel's down-after-milliseconds: how long a primary must be silent before it is replaced. */
  readonly downAfterMs: number;
  stop(): Promise<void>;
}

/**
 * A primary, its replica and three sentinels (quorum 2), all on free ports: redis-server in
 * Sentinel mode, the same program Debian's redis-sentinel runs. Sentinels rewrite their
 * configuration files, so each gets one of its own in a temporary directory.
 */
export async function startSentinelRedis(downAfterMs = 1000): Promise<SentinelRedis> {
  const primary = await startPrivateRedis();
  const replica = await startPrivateRedis(['--replicaof', '127.0.0.1', String(primary.port)]);
  const primaryName = 'hr-primary';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-sentinel-'));
  const sentinels: ChildProcess[] = [];
  const sentinelPorts: number[] = [];
  const sentinelPids: number[] = [];
  const stop = async () => {
    await Promise.all(
      sentinels
        .filter((child) => child.exitCode === null)
        .map((child) => {
          const exited = new Promise((resolve) => child.once('exit', resolve));
          child.kill('SIGKILL');
          return exited;
        }),
    );
    await Promise.all([primary.stop(true), replica.stop(true)]);
  };
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const file = path.join(dir, `sentinel-${port}.conf`);
      fs.writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${primaryName} 127.0.0.1 ${primary.port} 2`,
          `sentinel down-after-milliseconds ${primaryName} ${downAfterMs}`,
          `sentinel failover-timeout ${primaryName} 10000`,
          `sentinel parallel-syncs ${primaryName} 1`,
          '',
        ].join('\n'),
      );
      // Debian's redis-sentinel (the package of that name), as production runs it.
      const sentinel = spawn('redis-sentinel', [file], { stdio: 'ignore' });
      sentinels.push(sentinel);
      sentinelPids.push(sentinel.pid ?? -1);
      sentinelPorts.push(port);
      await waitForPort(port, 5000);
    }
  } catch (error) {
    await stop();
    throw error;
  }
  const hosts = sentinelPorts.map((port) => `127.0.0.1:${port}`).join(',');
  return { url: `redis+sentinel://${hosts}/${primaryName}`, primaryName, nodes: [primary, replica], sentinelPorts, sentinelPids, downAfterMs, stop };
}

export interface RedisClusterNodes {
  /** `redis+cluster://` URL of every node: what Headroom is given. */
  readonly url: string;
  /** Each node as started (the first `primaries` began as primaries, the rest as their replicas). */
  readonly nodes: readonly PrivateRedis[];
  /** cluster-node-timeout: how long a primary must be silent before its replica takes over. */
  readonly nodeTimeoutMs: number;
  stop(): Promise<void>;
}

/**
 * A Redis Cluster of `primaries` primaries, each with one replica, on free ports (redis-server
 * with cluster-enabled, joined by `redis-cli --cluster create`); resolves once every node says
 * the cluster is ok.
 */
export async function startRedisCluster(primaries = 3, nodeTimeoutMs = 1000): Promise<RedisClusterNodes> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-cluster-'));
  const nodes: PrivateRedis[] = [];
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.stop(true)));
  };
  try {
    for (let i = 0; i < primaries * 2; i++) {
      const nodeDir = path.join(dir, `node-${i}`);
      fs.mkdirSync(nodeDir);
      nodes.push(
        await startPrivateRedis([
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          path.join(nodeDir, 'nodes.conf'),
          '--cluster-node-timeout',
          String(nodeTimeoutMs),
        ]),
      );
    }
    const created = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '1', '--cluster-yes'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    // Ok on every node, and every primary's replica in sync: a replica that never synced does not take over.
    await eventually('every node to say the cluster is ok, every replica online', 20_000, () => {
      let replicasOnline = 0;
      for (const node of nodes) {
        const info = spawnSync('redis-cli', ['-p', String(node.port), 'cluster', 'info'], { encoding: 'utf8', timeout: 5000 });
        if (!/cluster_state:ok/.test(info.stdout)) return undefined;
        const replication = spawnSync('redis-cli', ['-p', String(node.port), 'info', 'replication'], { encoding: 'utf8', timeout: 5000 });
        if (/role:master/.test(replication.stdout) && /slave0:.*state=online/.test(replication.stdout)) replicasOnline++;
      }
      return replicasOnline === primaries ? true : undefined;
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `redis+cluster://${nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`, nodes, nodeTimeoutMs, stop };
}

/** Polls `check` until it returns a value other than undefined, or fails after `timeoutMs`. */
export async function eventually<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastError ? `: ${String(lastError)}` : ''}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
