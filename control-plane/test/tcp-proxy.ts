import * as net from 'node:net';
import type { TestContext } from 'node:test';

export interface TcpProxy {
  /** 127.0.0.1:<port>: what to connect to instead of the target. */
  readonly port: number;
  /** Refuses new connections and breaks every open one: the target looks down. */
  cut(): Promise<void>;
  /** Accepts connections again, on the same port. */
  restore(): Promise<void>;
}

/** A TCP proxy to `target` that a test can cut: a PostgreSQL that goes away and comes back, without stopping the shared one. */
export async function tcpProxy(t: TestContext, target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listen = (port: number) => new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  const cut = async () => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  t.after(cut);
  return { port, cut, restore: () => (server.listening ? Promise.resolve() : listen(port)) };
}
