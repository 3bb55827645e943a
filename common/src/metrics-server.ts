import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a prom-client Registry offers; common does not depend on prom-client itself. */
export interface MetricsSource {
  metrics(): Promise<string>;
  readonly contentType: string;
}

/** Serves GET /metrics for Prometheus. Resolves once listening; `close()` is idempotent. */
export async function serveMetrics(source: MetricsSource, host: string, port: number): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    if (request.method !== 'GET' || request.url !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics is served here\n');
      return;
    }
    source.metrics().then(
      (text) => response.writeHead(200, { 'content-type': source.contentType }).end(text),
      (error: unknown) => response.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics failed: ${String(error)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  let closing: Promise<void> | undefined;
  return {
    port: (server.address() as AddressInfo).port,
    close: () => (closing ??= new Promise((resolve) => server.close(() => resolve()))),
  };
}
