import type * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';

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
