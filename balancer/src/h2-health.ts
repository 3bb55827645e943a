import { status } from '@grpc/grpc-js';
import { healthService, type HealthStatus } from '@headroom/proto';
import type { H2Method, H2ServerCall } from './h2-server-call';

type ServingStatus = HealthStatus | 'SERVICE_UNKNOWN';

/** Health requests are a service name: no reason for more than this. */
const maxHealthRequestBytes = 4096;
const check = healthService.Check!;
const watch = healthService.Watch!;
const list = healthService.List!;

/**
 * grpc.health.v1.Health on H2GrpcServer, answering as grpc-health-check's HealthImplementation
 * (what addHealthService puts on a grpc-js server): Check, Watch (the status now, then each time
 * it is set) and List, for the overall server ("") and each named service, NOT_SERVING at first.
 */
export class H2Health {
  private readonly statuses = new Map<string, HealthStatus>();
  // One per open Watch call: bounded by the server's streams.
  private readonly watchers = new Set<{ service: string; call: H2ServerCall }>();

  constructor(serviceNames: readonly string[]) {
    for (const name of ['', ...serviceNames]) this.statuses.set(name, 'NOT_SERVING');
  }

  /** Sets the status of the server and of each named service at once; watchers are told. */
  setStatus(servingStatus: HealthStatus): void {
    for (const name of this.statuses.keys()) this.statuses.set(name, servingStatus);
    for (const watcher of this.watchers) if (this.statuses.has(watcher.service)) this.write(watcher.call, servingStatus);
  }

  /** Ends every Watch call (the server is closing: they would hold it open for ever). */
  endWatches(): void {
    for (const { call } of this.watchers) call.sendStatus({ code: status.UNAVAILABLE, details: 'the server is shutting down' });
    this.watchers.clear();
  }

  methods(): H2Method[] {
    return [
      {
        path: check.path,
        maxRequestBytes: maxHealthRequestBytes,
        decode: (bytes) => check.requestDeserialize(bytes),
        run: (call, request) => {
          const service = serviceOf(request);
          const servingStatus = this.statuses.get(service);
          if (servingStatus === undefined) return call.sendStatus({ code: status.NOT_FOUND, details: `Health status unknown for service ${service}` });
          call.sendLastMessage(check.responseSerialize({ status: servingStatus }));
        },
      },
      {
        path: watch.path,
        maxRequestBytes: maxHealthRequestBytes,
        decode: (bytes) => watch.requestDeserialize(bytes),
        run: (call, request) => {
          const service = serviceOf(request);
          const watcher = { service, call };
          this.watchers.add(watcher);
          call.signal.addEventListener('abort', () => this.watchers.delete(watcher), { once: true });
          this.write(call, this.statuses.get(service) ?? 'SERVICE_UNKNOWN');
        },
      },
      {
        path: list.path,
        maxRequestBytes: maxHealthRequestBytes,
        decode: (bytes) => list.requestDeserialize(bytes),
        run: (call) => {
          const statuses: Record<string, { status: HealthStatus }> = {};
          for (const [name, servingStatus] of this.statuses) statuses[name] = { status: servingStatus };
          call.sendLastMessage(list.responseSerialize({ statuses }));
        },
      },
    ];
  }

  private write(call: H2ServerCall, servingStatus: ServingStatus): void {
    call.sendMessage(watch.responseSerialize({ status: servingStatus }));
  }
}

function serviceOf(request: unknown): string {
  const service = (request as { service?: unknown }).service;
  return typeof service === 'string' ? service : '';
}
