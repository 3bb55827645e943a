import * as fs from 'node:fs';
import * as tls from 'node:tls';
import { ConfigError } from '@headroom/common';
import type { ClientTls } from './tls';

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
  checkContext(field, options);
  return options;
}

// The same checks and messages as tls.ts (whose helpers are private to it).
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

function checkContext(field: string, options: Http2ClientTls): void {
  try {
    tls.createSecureContext({ ca: options.ca, ...(options.cert && options.key ? { cert: options.cert, key: options.key } : {}) });
  } catch (error) {
    throw new ConfigError(`${field}: ${(error as Error).message}`);
  }
}
