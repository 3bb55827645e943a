import { promises as dns } from 'node:dns';
import * as net from 'node:net';
import { ConfigError } from '@headroom/common';

/** How the setting is named to the user, in the library and in the CLI alike. */
const settingName = 'advertiseHost (--advertise-host, env HEADROOM_ADVERTISE_HOST)';

/** Longest the start waits for DNS to answer. */
export const advertiseHostLookupTimeoutMs = 5000;

/**
 * The host a worker advertises is what every balancer dials: one that does not resolve makes
 * the worker unreachable while it looks healthy in the ledger, so it stops the start instead.
 * (The port advertised is always the one the server bound.)
 */
export async function checkAdvertiseHost(host: string, timeoutMs = advertiseHostLookupTimeoutMs): Promise<void> {
  const got = `${settingName}: got ${JSON.stringify(host)}`;
  if (/^[^:\s]+:\d+$/.test(host) || /^\[.*\]:\d+$/.test(host)) {
    throw new ConfigError(`${got}, expected a host without a port (the port advertised is the one the server bound, --port)`);
  }
  const ip = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (net.isIP(ip) !== 0) {
    if (ip === '0.0.0.0' || ip === '::') throw new ConfigError(`${got}, which no balancer can dial; expected this machine's address as balancers see it`);
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEOUT' })), timeoutMs);
    timer.unref();
  });
  try {
    await Promise.race([dns.lookup(host), timedOut]);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new ConfigError(`${got}, it does not resolve (${code}); expected a host name or IP address of this worker that balancers can dial`);
  } finally {
    clearTimeout(timer);
  }
}
