import type { TestContext } from 'node:test';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A throwaway CA, and certificates it signed for 127.0.0.1 (server) and for a client; plus a CA nobody trusts. */
export function makeCertificates(t: TestContext) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-tls-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  for (const ca of ['ca', 'other-ca']) {
    openssl(
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-days',
      '1',
      '-subj',
      `/CN=headroom test ${ca}`,
      '-keyout',
      file(`${ca}.key`),
      '-out',
      file(`${ca}.pem`),
    );
  }
  const sign = (name: string, ca: string, extensions: string) => {
    openssl(
      'req',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      file(`${name}.key`),
      '-out',
      file(`${name}.csr`),
    );
    fs.writeFileSync(file(`${name}.ext`), extensions);
    openssl(
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      file(`${ca}.pem`),
      '-CAkey',
      file(`${ca}.key`),
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      file(`${name}.ext`),
      '-out',
      file(`${name}.pem`),
    );
  };
  sign('server', 'ca', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  sign('client', 'ca', 'extendedKeyUsage=clientAuth\n');
  sign('stranger', 'other-ca', 'extendedKeyUsage=clientAuth\n');
  return { file };
}
