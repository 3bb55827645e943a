/** The control plane CLI as a process of its own, on the stack's Redis and a real Unleash. */
import type { TestContext } from 'node:test';
import { randomBytes } from 'node:crypto';
import { ControlPlaneApi, spawnReady, type ReadyProcess } from '@headroom/testkit';
import { testSchema, type TestSchema } from '@headroom/unleash-local';
import { cliPaths, keyPrefix, readyTimeoutMs, type FlagSource } from './stack';

const apiTimeoutMs = 15_000;

export interface ControlPlaneProcess {
  readonly url: string;
  readonly process: ReadyProcess;
  /** Its API as an operator (15 s at most a call). */
  readonly api: ControlPlaneApi;
}

/** Unique flag names, so that cases sharing one Unleash server never see each other's flags. */
export function uniqueFlags(unleash: { url: string; clientToken: string }): FlagSource {
  const tag = randomBytes(4).toString('hex');
  return {
    unleashUrl: unleash.url,
    clientToken: unleash.clientToken,
    candidateFlag: `faults-${tag}.candidate-cluster`,
    parallelismFlag: `faults-${tag}.max-parallelism`,
  };
}

export interface ControlPlaneProcessOptions {
  /**
   * The audit log's schema, shared with other replicas (the caller drops it); absent: a schema of
   * its own on the test PostgreSQL, dropped once the process stopped.
   */
  database?: TestSchema;
  /** More CLI flags, e.g. --autopilot-lease-ms. */
  args?: string[];
}

export async function startControlPlaneProcess(
  t: TestContext,
  redisUrl: string,
  adminToken: string,
  flags: FlagSource,
  integrations: string[],
  options: ControlPlaneProcessOptions = {},
): Promise<ControlPlaneProcess> {
  const operatorToken = randomBytes(16).toString('hex');
  // After hooks run in the order registered: a schema of its own is dropped once the process stopped.
  const ownsDatabase = options.database === undefined;
  const database = options.database ?? testSchema('hr_faults');
  const process = await spawnReady(
    t,
    cliPaths.controlPlane,
    [
      '--database-url',
      database.url,
      '--database-schema',
      database.schema,
      '--port',
      '0',
      '--redis-url',
      redisUrl,
      '--key-prefix',
      keyPrefix,
      '--unleash-url',
      flags.unleashUrl,
      '--unleash-admin-token',
      adminToken,
      '--candidate-flag',
      flags.candidateFlag,
      '--parallelism-flag',
      flags.parallelismFlag,
      '--integrations',
      integrations.join(','),
      '--operator-tokens',
      `faults=${operatorToken}`,
      '--ui-dir',
      'none',
      ...(options.args ?? []),
    ],
    readyTimeoutMs,
  ).catch(async (error: unknown) => {
    if (ownsDatabase) await database.drop();
    throw error;
  });
  if (ownsDatabase) t.after(() => database.drop());
  const url = process.ready.address;
  return { url, process, api: new ControlPlaneApi({ apiUrl: `${url}/api/v1`, token: operatorToken, timeoutMs: apiTimeoutMs }) };
}
