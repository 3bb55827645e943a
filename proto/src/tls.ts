import * as fs from 'node:fs';
import * as tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { z } from 'zod';
import { ConfigError } from '@headroom/common';

const pemFile = z.string().min(1, 'expected the path of a PEM file');

/** TLS for a gRPC server: its certificate and key; with clientCaFile, clients must present a certificate that CA signed (mutual TLS). */
export const serverTlsSchema = z
  .object({
    certFile: pemFile,
    keyFile: pemFile,
    clientCaFile: pemFile.optional(),
  })
  .strict();
export type ServerTls = z.output<typeof serverTlsSchema>;

/** TLS for a gRPC client: the CA that signed the servers' certificates; a certificate and key of its own for mutual TLS. */
export const clientTlsSchema = z
  .object({
    caFile: pemFile,
    certFile: pemFile.optional(),
    keyFile: pemFile.optional(),
    /** The name the servers' certificates carry, when it is not the host dialled. */
    serverName: z.string().min(1).max(253).optional(),
  })
  .strict()
  .refine((tls) => (tls.certFile === undefined) === (tls.keyFile === undefined), {
    message: 'certFile and keyFile go together (a client certificate needs its key)',
    path: ['certFile'],
  });
export type ClientTls = z.output<typeof clientTlsSchema>;

/** `field` names the setting in errors, e.g. "tls" or "workerTls". Files are read once, at start. */
export function serverCredentials(tls: ServerTls | undefined, field: string): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  const clientCa = tls.clientCaFile === undefined ? null : readPem(`${field}.clientCaFile`, tls.clientCaFile);
  const keyPair = { private_key: readPem(`${field}.keyFile`, tls.keyFile), cert_chain: readPem(`${field}.certFile`, tls.certFile) };
  return built(field, () => {
    checkPair(keyPair.private_key, keyPair.cert_chain, clientCa);
    return grpc.ServerCredentials.createSsl(clientCa, [keyPair], clientCa !== null);
  });
}

export interface ChannelSecurity {
  credentials: grpc.ChannelCredentials;
  /** Channel options that go with them (the expected server name). */
  options: grpc.ChannelOptions;
}

export function channelSecurity(tls: ClientTls | undefined, field: string): ChannelSecurity {
  if (!tls) return { credentials: grpc.credentials.createInsecure(), options: {} };
  const ca = readPem(`${field}.caFile`, tls.caFile);
  const key = tls.keyFile === undefined ? null : readPem(`${field}.keyFile`, tls.keyFile);
  const cert = tls.certFile === undefined ? null : readPem(`${field}.certFile`, tls.certFile);
  return {
    credentials: built(field, () => {
      if (key && cert) checkPair(key, cert, ca);
      return grpc.credentials.createSsl(ca, key, cert);
    }),
    options: tls.serverName ? { 'grpc.ssl_target_name_override': tls.serverName, 'grpc.default_authority': tls.serverName } : {},
  };
}

/** What `http2.createSecureServer(options)` needs of a ServerTls: the files read, the pair checked. */
export interface Http2ServerTls {
  cert: Buffer;
  key: Buffer;
  /** With clientCaFile: the CA client certificates must be signed by, and the server asks for and checks them. */
  ca?: Buffer;
  requestCert: boolean;
  rejectUnauthorized: boolean;
}

/**
 * The TLS options of a node:http2 server for `tls` (undefined: plain text), as serverCredentials
 * gives them to grpc-js: with clientCaFile, a client must present a certificate that CA signed
 * (mutual TLS). Files are read once, now; a key that does not match its certificate is found now.
 */
export function http2ServerTls(tls: ServerTls | undefined, field: string): Http2ServerTls | undefined {
  if (!tls) return undefined;
  const clientCa = tls.clientCaFile === undefined ? undefined : readPem(`${field}.clientCaFile`, tls.clientCaFile);
  const options: Http2ServerTls = {
    key: readPem(`${field}.keyFile`, tls.keyFile),
    cert: readPem(`${field}.certFile`, tls.certFile),
    requestCert: clientCa !== undefined,
    rejectUnauthorized: clientCa !== undefined,
  };
  if (clientCa) options.ca = clientCa;
  built(field, () => checkPair(options.key, options.cert, clientCa ?? null));
  return options;
}

/** What `http2.connect('https://…', options)` needs of a ClientTls: the files read, the pair checked. */
export interface Http2ClientTls {
  ca: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** The name the servers' certificates carry, when it is not the host dialled. */
  servername?: string;
}

/**
 * The TLS options of a node:http2 client for `tls` (undefined: plain text), as channelSecurity
 * gives them to grpc-js. `field` names the setting in errors, e.g. "workerTls". Files are read
 * once, now; a key that does not match its certificate is found now, not at the first connect.
 */
export function http2ClientTls(tls: ClientTls | undefined, field: string): Http2ClientTls | undefined {
  if (!tls) return undefined;
  const options: Http2ClientTls = { ca: readPem(`${field}.caFile`, tls.caFile) };
  if (tls.certFile !== undefined && tls.keyFile !== undefined) {
    options.cert = readPem(`${field}.certFile`, tls.certFile);
    options.key = readPem(`${field}.keyFile`, tls.keyFile);
  }
  if (tls.serverName !== undefined) options.servername = tls.serverName;
  if (options.cert && options.key) built(field, () => checkPair(options.key!, options.cert!, options.ca));
  return options;
}

function readPem(field: string, file: string): Buffer {
  let content: Buffer;
  try {
    content = fs.readFileSync(file);
  } catch (error) {
    throw new ConfigError(`${field}: cannot read ${file}: ${(error as Error).message}`);
  }
  if (!content.includes('-----BEGIN ')) throw new ConfigError(`${field}: ${file} is not a PEM file (no "-----BEGIN" line)`);
  return content;
}

/** grpc-js finds a key that does not match its certificate only when it binds or connects: find it at start. */
function checkPair(key: Buffer, cert: Buffer, ca: Buffer | null): void {
  tls.createSecureContext({ key, cert, ...(ca ? { ca } : {}) });
}

/** A key that does not match its certificate, or a malformed PEM, is found here. */
function built<T>(field: string, build: () => T): T {
  try {
    return build();
  } catch (error) {
    throw new ConfigError(`${field}: ${(error as Error).message}`);
  }
}
