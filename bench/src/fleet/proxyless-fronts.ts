/**
 * Starts proxyless fronts (proxyless-front.ts), each its own process, in front of a fleet's
 * workers: the generator calls them as it calls balancers.
 */
import { startNodeProcess } from '@headroom/testkit';
import type { ProxylessClientOptions } from '@headroom/client/proxyless';
import { stopProcess, type BalancerEndpoint } from './headroom-fleet';

const frontScript = require.resolve('./proxyless-front');

export interface ProxylessFrontOptions {
  /** The process's name and the client's balancer id. */
  name: string;
  redisUrl: string;
  /** The client's options; its balancerId is `name`. */
  clientOptions: ProxylessClientOptions;
  logDir: string;
  readyTimeoutMs: number;
}

/** Starts one front and waits for its ready line; `register` gets its stop as soon as it runs. */
export async function startProxylessFront(options: ProxylessFrontOptions, register: (cleanup: () => Promise<void>) => void): Promise<BalancerEndpoint> {
  const clientOptions: ProxylessClientOptions = { ...options.clientOptions, balancerId: options.name };
  const { process: child, ready } = await startNodeProcess({
    name: options.name,
    script: frontScript,
    args: ['--redis-url', options.redisUrl, '--options', JSON.stringify(clientOptions)],
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' },
    logDir: options.logDir,
    readyTimeoutMs: options.readyTimeoutMs,
  });
  register(() => stopProcess(child));
  return { name: options.name, balancerId: options.name, address: ready.address };
}
