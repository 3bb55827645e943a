import { spawnSync } from 'node:child_process';

export interface PromtoolResult {
  status: number | null;
  output: string;
}

/** Runs the real `promtool` (Debian package `prometheus`; .ci/run installs it). */
export function promtool(args: readonly string[], cwd?: string): PromtoolResult {
  const result = spawnSync('promtool', args, { encoding: 'utf8', timeout: 30_000, ...(cwd ? { cwd } : {}) });
  if (result.error) {
    const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new Error(
      missing
        ? 'promtool is not on the PATH: apt-get install prometheus (.ci/run does it)'
        : `promtool ${args.join(' ')} failed to run: ${result.error.message}`,
    );
  }
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}
