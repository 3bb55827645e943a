import * as grpc from '@grpc/grpc-js';
import { HealthImplementation, service as healthService } from 'grpc-health-check';
import type { ChannelSecurity } from './tls';

export type HealthStatus = 'SERVING' | 'NOT_SERVING';

/**
 * Adds the standard grpc.health.v1.Health service to `server`. The returned function
 * sets the status of the overall server ("") and of each named service at once.
 */
export function addHealthService(server: grpc.Server, serviceNames: readonly string[]): (status: HealthStatus) => void {
  const names = ['', ...serviceNames];
  const health = new HealthImplementation(Object.fromEntries(names.map((name) => [name, 'NOT_SERVING'])));
  health.addToServer(server);
  return (status) => {
    for (const name of names) health.setStatus(name, status);
  };
}

/** The grpc.health.v1.Health service definition (paths, serializers), for servers not built on grpc-js. */
export { healthService };

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'Health');

type CheckMethod = (
  request: { service: string },
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, reply?: { status?: string }) => void,
) => void;

/**
 * Asks the server at `address` for its grpc.health.v1 status of `serviceName`, on a channel
 * of its own (closed after), within `timeoutMs`. Never rejects: a call that failed resolves
 * with its error's details.
 */
export function checkHealth(
  address: string,
  security: ChannelSecurity,
  serviceName: string,
  timeoutMs: number,
): Promise<{ status: string } | { error: string }> {
  const client = new HealthClient(address, security.credentials, { ...security.options, 'grpc.enable_channelz': 0 });
  const check = (client as unknown as Record<string, CheckMethod>).check!;
  return new Promise((resolve) => {
    check.call(client, { service: serviceName }, { deadline: Date.now() + timeoutMs }, (error, reply) => {
      client.close();
      resolve(error ? { error: `${grpc.status[error.code] ?? error.code}: ${error.details}` } : { status: String(reply?.status ?? 'UNKNOWN') });
    });
  });
}
