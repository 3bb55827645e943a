/**
 * How the demo starts its balancers and workers, in one place: the launcher runs its own with
 * these flags and env, and prints the same as shell commands that start one more balancer or
 * worker on the run's ledger and flags, so that anyone can join the running stack.
 */
import * as path from 'node:path';

/** One process: node `script` with `args`; `env` holds what goes by env (secrets, the handlers' settings). */
export interface Launch {
  script: string;
  args: string[];
  env: Record<string, string>;
}

/** What every balancer and worker of a run shares: the ledger and the flags. */
export interface StackSettings {
  redisUrl: string;
  keyPrefix: string;
  unleashUrl: string;
  /** Goes by env (UNLEASH_CLIENT_TOKEN): command lines are visible to every local user (ps). */
  unleashClientToken: string;
}

export interface BalancerSettings {
  script: string;
  /** 0 picks a free port. */
  port: number;
  keptForUserPresentShare: number;
}

export interface WorkerSettings {
  script: string;
  cluster: string;
  handlersScript: string;
  /** What the handlers read, e.g. the bank simulator's URL. */
  handlersEnv: Record<string, string>;
  maxParallelism: number;
  drainTimeoutMs: number;
}

function stackArgs(stack: StackSettings): string[] {
  return ['--unleash-url', stack.unleashUrl, '--key-prefix', stack.keyPrefix, '--redis-url', stack.redisUrl];
}

export function balancerLaunch(stack: StackSettings, balancer: BalancerSettings): Launch {
  return {
    script: balancer.script,
    args: ['--port', String(balancer.port), '--kept-for-user-present-share', String(balancer.keptForUserPresentShare), ...stackArgs(stack)],
    env: { UNLEASH_CLIENT_TOKEN: stack.unleashClientToken },
  };
}

/** On a free port: many run side by side. */
export function workerLaunch(stack: StackSettings, worker: WorkerSettings): Launch {
  return {
    script: worker.script,
    args: [
      '--port',
      '0',
      '--cluster',
      worker.cluster,
      '--handlers',
      worker.handlersScript,
      '--max-parallelism',
      String(worker.maxParallelism),
      '--drain-timeout-ms',
      String(worker.drainTimeoutMs),
      ...stackArgs(stack),
    ],
    env: { UNLEASH_CLIENT_TOKEN: stack.unleashClientToken, ...worker.handlersEnv },
  };
}

/** `word` as one word of a POSIX shell command: unchanged when it holds no special character, else single-quoted. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * `launch` as a command to paste into a shell whose working directory is `cwd`: env first
 * (VAR=value, for this command only), then node and the script; paths under `cwd` are made
 * relative to it, so the command reads as it would in the repository's README. An env variable
 * named in `secretFiles` is read from its file when the command runs (VAR="$(cat file)"), so the
 * secret itself is never printed.
 */
export function shellCommand(launch: Launch, cwd: string, secretFiles: Readonly<Record<string, string>> = {}): string {
  const shortened = (word: string) => {
    if (!path.isAbsolute(word)) return word;
    const relative = path.relative(cwd, word);
    return relative.startsWith('..') || path.isAbsolute(relative) ? word : relative;
  };
  const env = Object.entries(launch.env).map(([name, value]) => {
    const secretFile = secretFiles[name];
    return secretFile === undefined ? `${name}=${shellQuote(value)}` : `${name}="$(cat ${shellQuote(secretFile)})"`;
  });
  return [...env, 'node', shortened(launch.script), ...launch.args.map(shortened)].map((word, i) => (i < env.length ? word : shellQuote(word))).join(' ');
}
