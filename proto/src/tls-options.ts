import { z } from 'zod';
import { ConfigError, type OptionSpec } from '@headroom/common';
import type { ClientTls, ServerTls } from './tls';

/** The flags of a CLI whose gRPC server may use TLS (balancer, worker). */
export const serverTlsOptionSpecs: readonly OptionSpec[] = [
  {
    key: 'tlsCert',
    flag: 'tls-cert',
    env: 'HEADROOM_TLS_CERT',
    valueName: 'PEM',
    description: 'serve gRPC over TLS with this certificate (chain); needs --tls-key',
  },
  { key: 'tlsKey', flag: 'tls-key', env: 'HEADROOM_TLS_KEY', valueName: 'PEM', description: 'the private key of --tls-cert' },
  {
    key: 'tlsClientCa',
    flag: 'tls-client-ca',
    env: 'HEADROOM_TLS_CLIENT_CA',
    valueName: 'PEM',
    description: 'mutual TLS: accept only clients with a certificate this CA signed',
  },
];

export const serverTlsOptionsShape = {
  tlsCert: z.string().min(1).optional(),
  tlsKey: z.string().min(1).optional(),
  tlsClientCa: z.string().min(1).optional(),
};

export function serverTlsFromOptions(options: {
  tlsCert?: string | undefined;
  tlsKey?: string | undefined;
  tlsClientCa?: string | undefined;
}): ServerTls | undefined {
  const { tlsCert, tlsKey, tlsClientCa } = options;
  if (tlsCert === undefined && tlsKey === undefined && tlsClientCa === undefined) return undefined;
  if (tlsCert === undefined || tlsKey === undefined)
    throw new ConfigError('--tls-cert and --tls-key (env HEADROOM_TLS_CERT, HEADROOM_TLS_KEY) go together: TLS needs both the certificate and its key');
  return { certFile: tlsCert, keyFile: tlsKey, ...(tlsClientCa === undefined ? {} : { clientCaFile: tlsClientCa }) };
}

/** The flags of a CLI that calls workers (balancer, control plane) when the workers serve TLS. */
export const workerTlsOptionSpecs: readonly OptionSpec[] = [
  {
    key: 'workerTlsCa',
    flag: 'worker-tls-ca',
    env: 'HEADROOM_WORKER_TLS_CA',
    valueName: 'PEM',
    description: 'call workers over TLS, trusting this CA for their certificates',
  },
  {
    key: 'workerTlsCert',
    flag: 'worker-tls-cert',
    env: 'HEADROOM_WORKER_TLS_CERT',
    valueName: 'PEM',
    description: 'mutual TLS: the certificate shown to workers; needs --worker-tls-key',
  },
  { key: 'workerTlsKey', flag: 'worker-tls-key', env: 'HEADROOM_WORKER_TLS_KEY', valueName: 'PEM', description: 'the private key of --worker-tls-cert' },
  {
    key: 'workerTlsServerName',
    flag: 'worker-tls-server-name',
    env: 'HEADROOM_WORKER_TLS_SERVER_NAME',
    valueName: 'NAME',
    description: "the name in the workers' certificates, when not their address",
  },
];

export const workerTlsOptionsShape = {
  workerTlsCa: z.string().min(1).optional(),
  workerTlsCert: z.string().min(1).optional(),
  workerTlsKey: z.string().min(1).optional(),
  workerTlsServerName: z.string().min(1).max(253).optional(),
};

export function workerTlsFromOptions(options: {
  workerTlsCa?: string | undefined;
  workerTlsCert?: string | undefined;
  workerTlsKey?: string | undefined;
  workerTlsServerName?: string | undefined;
}): ClientTls | undefined {
  const { workerTlsCa, workerTlsCert, workerTlsKey, workerTlsServerName } = options;
  if (workerTlsCa === undefined) {
    if (workerTlsCert !== undefined || workerTlsKey !== undefined || workerTlsServerName !== undefined) {
      throw new ConfigError(
        "--worker-tls-cert, --worker-tls-key and --worker-tls-server-name need --worker-tls-ca (env HEADROOM_WORKER_TLS_CA): the CA that signed the workers' certificates",
      );
    }
    return undefined;
  }
  if ((workerTlsCert === undefined) !== (workerTlsKey === undefined))
    throw new ConfigError('--worker-tls-cert and --worker-tls-key (env HEADROOM_WORKER_TLS_CERT, HEADROOM_WORKER_TLS_KEY) go together');
  return {
    caFile: workerTlsCa,
    ...(workerTlsCert === undefined ? {} : { certFile: workerTlsCert }),
    ...(workerTlsKey === undefined ? {} : { keyFile: workerTlsKey }),
    ...(workerTlsServerName === undefined ? {} : { serverName: workerTlsServerName }),
  };
}
