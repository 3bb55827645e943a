import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TestContext } from 'node:test';
import type { RunningUnleash } from '@headroom/unleash-local';

export interface UnleashProxy {
  /** The Unleash to hand the control plane: the real one, reached through the proxy. */
  unleash: RunningUnleash;
  /** How the proxy treats the Admin API's writes (POST, PUT, PATCH, DELETE); reads always pass. */
  writes: { mode: 'pass' } | { mode: 'delay'; delayMs: number } | { mode: 'fail'; status: number };
  /** Admin API writes seen. */
  writesSeen: number;
}

/**
 * A real Unleash behind an HTTP proxy that can slow down or refuse its Admin API writes: what a
 * loaded or failing Unleash looks like to the control plane, with everything else real.
 */
export async function unleashProxy(t: TestContext, target: RunningUnleash): Promise<UnleashProxy> {
  const upstream = new URL(target.url);
  const proxy: UnleashProxy = { unleash: target, writes: { mode: 'pass' }, writesSeen: 0 };
  const server = http.createServer((request, response) => {
    const isWrite = request.method !== 'GET' && request.method !== 'HEAD' && request.url?.startsWith('/api/admin/') === true;
    const behaviour = isWrite ? proxy.writes : ({ mode: 'pass' } as const);
    if (isWrite) proxy.writesSeen++;
    if (behaviour.mode === 'fail') {
      request.resume();
      response.writeHead(behaviour.status, { 'content-type': 'application/json' }).end(JSON.stringify({ message: 'refused by the test proxy' }));
      return;
    }
    const forward = () => {
      const outgoing = http.request(
        { host: upstream.hostname, port: upstream.port, method: request.method, path: request.url, headers: { ...request.headers, host: upstream.host } },
        (answer) => {
          response.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(response);
        },
      );
      outgoing.on('error', () => response.destroy());
      request.pipe(outgoing);
    };
    if (behaviour.mode === 'delay') setTimeout(forward, behaviour.delayMs).unref();
    else forward();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  proxy.unleash = { ...target, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}${upstream.pathname.replace(/\/$/, '')}` };
  return proxy;
}
