/**
 * The demo's feature-flag control: Unleash (the given one, or a real one of its own on an
 * embedded PostgreSQL, run as a child) and the control plane on it (a child), with API tokens
 * made up for the run. The initial candidate share goes through the control plane's API, as
 * an operator's change would.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { apiTokenNames, controlPlaneSecretsEnv, makeApiTokens, type DemoApiTokens } from './api-tokens';
import type { DemoConfig } from './options';
import { ControlPlaneApi, portIsFree, type NodeProcess } from '@headroom/testkit';
import type { PlanInput } from '@headroom/control-plane';
import { StartError, messageOf, say, write } from './terminal';

/** Starts a child of the launcher; `secrets` go by env. */
export type SpawnChild = (label: string, script: string, args: string[], secrets?: Record<string, string>) => NodeProcess;

/** Where the flags live and the tokens to reach them. */
export interface UnleashAccess {
  url: string;
  adminToken: string;
  clientToken: string;
  /** Ours (embedded, stopped at exit) or the given one. */
  embedded: boolean;
  /** PostgreSQL for the control plane's audit log: the embedded one, or --database-url. */
  databaseUrl: string;
}

const scripts = {
  controlPlane: require.resolve('@headroom/control-plane/cli'),
  embeddedUnleash: path.join(__dirname, 'embedded-unleash.js'),
};
/** The control plane's port unless --control-plane-port says otherwise (any free one when taken). */
const defaultControlPlanePort = 8080;
const timeouts = {
  unleashAnswerMs: 5000,
  /** PostgreSQL's initdb and Unleash's migrations: a few seconds, more on a slow disk. */
  unleashReadyMs: 90_000,
  controlPlaneReadyMs: 30_000,
  apiCallMs: 15_000,
};

/** Resolves with why Unleash at `url` is not usable (its /health does not answer 200), or undefined. */
async function unleashProblem(url: string, timeoutMs: number): Promise<string | undefined> {
  try {
    const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(timeoutMs) });
    return response.ok ? undefined : `GET /health answered HTTP ${response.status}`;
  } catch (error) {
    const cause = error instanceof Error && error.cause !== undefined ? `: ${messageOf(error.cause)}` : '';
    return `GET /health failed (${messageOf(error)}${cause})`;
  }
}

export class DemoControl {
  /** The control plane accepts these (and only these) for this run. */
  readonly apiTokens: DemoApiTokens = makeApiTokens();
  /** Our Unleash (and its PostgreSQL), when no --unleash-url is given. */
  unleashChild: NodeProcess | undefined;
  controlPlane: NodeProcess | undefined;
  /** Data directory of that PostgreSQL: fresh for each run, deleted at exit. */
  private postgresDataDir: string | undefined;

  constructor(
    private readonly config: DemoConfig,
    /** The load generator's integrations, each with a share of its own (and a rollback of its own). */
    private readonly integrations: readonly string[],
    private readonly spawn: SpawnChild,
  ) {}

  /** The given Unleash if it answers, else a real one of our own on an embedded PostgreSQL. */
  async startUnleash(): Promise<UnleashAccess> {
    const { unleashUrl, unleashAdminToken, unleashClientToken, databaseUrl } = this.config;
    if (unleashUrl !== undefined && unleashAdminToken !== undefined && unleashClientToken !== undefined && databaseUrl !== undefined) {
      const url = unleashUrl.replace(/\/+$/, '');
      write(`checking Unleash at ${url}... `);
      const problem = await unleashProblem(url, timeouts.unleashAnswerMs);
      if (problem)
        throw new StartError(
          `Unleash at ${url} (--unleash-url, UNLEASH_URL): ${problem}. Fix it, or leave UNLEASH_URL unset and the demo runs an Unleash of its own.`,
        );
      say('ok');
      return { url, adminToken: unleashAdminToken, clientToken: unleashClientToken, embedded: false, databaseUrl };
    }
    // A fresh data directory per run: Unleash makes its initial API tokens only in an empty
    // database, a flag left rolled back by an earlier run would skew this one, and two demos
    // at once do not share a PostgreSQL.
    this.postgresDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-demo-postgres-'));
    write(`starting Unleash (embedded PostgreSQL, data in ${this.postgresDataDir}; initdb and migrations take a few seconds)... `);
    const child = this.spawn('unleash', scripts.embeddedUnleash, ['--data-dir', this.postgresDataDir], {
      // Unleash would otherwise exit on SIGTERM before PostgreSQL is stopped.
      GRACEFUL_SHUTDOWN_ENABLE: 'false',
      // Unleash's own migrations call a deprecated pg API: nothing the user can act on.
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --no-deprecation`.trim(),
    });
    this.unleashChild = child;
    const ready = await child.waitForEvent('ready', timeouts.unleashReadyMs);
    const url = String(ready.url);
    say(`ok (${url}, pid ${child.pid}; PostgreSQL pid ${String(ready.postgresPid)})`);
    return {
      url,
      adminToken: String(ready.adminToken),
      clientToken: String(ready.clientToken),
      embedded: true,
      databaseUrl: this.config.databaseUrl ?? String(ready.databaseUrl),
    };
  }

  /**
   * Starts the control plane on --control-plane-port (else 8080, else any free port); resolves
   * with its API's URL, and the admin UI's when it serves one (the UI is built by npm install).
   */
  async startControlPlane(unleash: UnleashAccess, ledger: { redisUrl: string; keyPrefix: string }): Promise<{ apiUrl: string; uiUrl: string | undefined }> {
    const port = this.config.controlPlanePort ?? ((await portIsFree(defaultControlPlanePort)) ? defaultControlPlanePort : 0);
    write('starting control plane... ');
    const child = this.spawn(
      'control-plane',
      scripts.controlPlane,
      [
        '--port',
        String(port),
        '--integrations',
        this.integrations.join(','),
        '--unleash-url',
        unleash.url,
        '--key-prefix',
        ledger.keyPrefix,
        '--redis-url',
        ledger.redisUrl,
      ],
      // The database URL holds a password: by env, as the tokens.
      { ...controlPlaneSecretsEnv(this.apiTokens, unleash.adminToken), HEADROOM_DATABASE_URL: unleash.databaseUrl },
    );
    this.controlPlane = child;
    const ready = await child.waitForEvent('ready', timeouts.controlPlaneReadyMs);
    const apiUrl = `${String(ready.url)}/api/v1`;
    const uiUrl = ready.ui === true ? `${String(ready.url)}/` : undefined;
    say(`ready at ${apiUrl} (pid ${child.pid})`);
    return { apiUrl, uiUrl };
  }

  /**
   * PUT /traffic with the operator token: the flag in Unleash, not the balancer, holds the
   * split. Each integration has a share of its own: all get the same.
   */
  async setInitialSplit(apiUrl: string): Promise<void> {
    const percent = this.config.candidatePercent;
    write(`setting the candidate share to ${percent}% (PUT ${apiUrl}/traffic)... `);
    const api = new ControlPlaneApi({ apiUrl, token: this.apiTokens.operator, timeoutMs: timeouts.apiCallMs });
    const perIntegration = this.integrations.length > 0 ? { integrations: Object.fromEntries(this.integrations.map((name) => [name, percent])) } : {};
    let view;
    try {
      view = await api.setTraffic({ defaultPercent: percent, ...perIntegration });
    } catch (error) {
      throw new StartError(`the control plane did not set the candidate share: ${messageOf(error)}`);
    }
    const shares = Object.entries(view.flag.integrations).map(([name, share]) => `${name} ${share.percent}%`);
    say(`ok (flag ${view.flag.name}: ${[...shares, `others ${view.flag.defaultPercent}%`].join(', ')})`);
    const effective = [view.effectivePercent.default, ...Object.values(view.effectivePercent.integrations)];
    if (effective.some((share) => share !== percent)) {
      say(
        `  note: the candidate cluster gets less than ${percent}%: it is rolled back ` +
          `(${view.flag.enabled ? 'by an override in Redis, or per integration' : `flag ${view.flag.name} is switched off in Unleash`}); POST ${apiUrl}/resume undoes that.`,
      );
    }
  }

  /** With --rollout demo: starts the demo's plan through the API (POST /rollouts), as an operator would. */
  async startRollout(apiUrl: string): Promise<void> {
    if (this.config.rollout !== 'demo') return;
    const api = new ControlPlaneApi({ apiUrl, token: this.apiTokens.operator, timeoutMs: timeouts.apiCallMs });
    write(`starting the demo rollout plan (POST ${apiUrl}/rollouts)... `);
    try {
      const rollout = await api.startRollout(demoRolloutPlan(this.integrations));
      say(`ok (${rollout.id}: ${rollout.plan.steps.length} steps; watch it on the Rollouts page or GET ${apiUrl}/rollouts/${rollout.id})`);
    } catch (error) {
      // The rest runs on: the plan can be started again by hand.
      say(`failed: ${messageOf(error)}`);
    }
  }

  /** The addresses and tokens a user needs, printed once everything runs. */
  printAccess(apiUrl: string, uiUrl: string | undefined, unleash: UnleashAccess): void {
    const { operator, viewer } = this.apiTokens;
    say(
      uiUrl
        ? `Admin UI:      ${uiUrl}   (log in with the operator token below; the viewer token only reads)`
        : 'Admin UI:      not built (npm run build makes ui/dist/app)',
    );
    say(`Control plane: ${apiUrl}   (REST; ${apiUrl}/openapi.json describes it)`);
    say(`  operator token: ${operator}   (${apiTokenNames.operator}: reads, and changes traffic, parallelism, rollback)`);
    say(`  viewer token:   ${viewer}   (${apiTokenNames.viewer}: reads only)`);
    say(`  e.g. curl -H "Authorization: Bearer ${operator}" ${apiUrl}/traffic`);
    if (this.config.rollout !== 'demo')
      say(`  rollouts: npm start -- --rollout demo starts the demo plan; or POST a plan to ${apiUrl}/rollouts (docs/rollouts.md)`);
    say(
      `Unleash:       ${unleash.url}   ${unleash.embedded ? "(this run's own; web UI login admin / unleash4all, Unleash's default on a new database)" : '(given by --unleash-url)'}`,
    );
  }

  /** Our Unleash deletes its data when it stops; this covers its being killed. */
  removePostgresData(): void {
    if (this.postgresDataDir) fs.rmSync(this.postgresDataDir, { recursive: true, force: true });
  }

  killNow(): void {
    this.controlPlane?.killNow();
    this.unleashChild?.killNow();
    this.removePostgresData();
  }
}

/**
 * The plan `--rollout demo` starts (docs/rollouts.md): the integrations to 25% then 50% of their
 * keys at growing parallelism, then 75% with a parallelism search up to 30. The demo's load is
 * small (20 tasks/s over four banks): its first step sends a quarter, and its windows are a
 * minute, so that each integration runs enough tasks on the candidate to be judged; its p95
 * line is looser than the default, since a p95 of 30 tasks is nearly their slowest.
 */
export function demoRolloutPlan(integrations: readonly string[]): PlanInput {
  return {
    name: 'demo: parallel workers',
    integrations: [...integrations],
    windowSeconds: 60,
    holdSeconds: 60,
    minSamples: 30,
    gates: { p50Ratio: 1.3, p95Ratio: 2 },
    steps: [
      { candidatePercent: 25, maxParallelism: 4 },
      { candidatePercent: 50, maxParallelism: 8 },
      { candidatePercent: 75, search: { from: 8, factor: 1.5, max: 30 } },
    ],
  };
}
