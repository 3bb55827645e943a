import { Agent } from 'undici';
import { Gauge, type Registry } from 'prom-client';

/** Upstream origins given their own series; the rest share "other". */
const maxLabelledOrigins = 200;

/**
 * The worker's shared HTTP agent (undici): handlers pass it as `dispatcher` to undici's
 * `request` or `fetch`. Its connections per upstream origin are capped explicitly (a client
 * library's hidden socket limit is what throttled the published case) and shown as
 * `headroom_worker_upstream_connections{origin, state}`: connected, running (requests in
 * progress) and pending (requests waiting for a connection: the cap is too low).
 */
export function createUpstreamAgent(maxConnectionsPerOrigin: number, registry: Registry): Agent {
  const agent = new Agent({ connections: maxConnectionsPerOrigin, keepAliveTimeout: 10_000 });
  new Gauge({
    name: 'headroom_worker_upstream_connections',
    help: 'Connections of the shared HTTP agent per upstream origin: connected, running (requests in progress), pending (requests waiting for a connection)',
    labelNames: ['origin', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      let labelled = 0;
      for (const [origin, stats] of Object.entries(agent.stats)) {
        const label = labelled++ < maxLabelledOrigins ? origin : 'other';
        // A pool reports counts; a single client reports booleans.
        this.inc({ origin: label, state: 'connected' }, Number(stats.connected));
        this.inc({ origin: label, state: 'running' }, Number(stats.running));
        this.inc({ origin: label, state: 'pending' }, Number(stats.pending));
      }
    },
  });
  return agent;
}
