/**
 * A real Prometheus server for the tests: the `prometheus` binary of the Debian package, on a
 * free port, with its config and TSDB in a temp dir removed afterwards.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { stringify as toYaml } from 'yaml';
import { freePort } from '@headroom/testkit';

export interface PrometheusServer {
  readonly url: string;
  /** An instant query; throws with Prometheus's error when it fails. */
  query(expr: string): Promise<{ metric: Record<string, string>; value: [number, string] }[]>;
  /** GET an API path (e.g. /api/v1/rules) and return its `data`. */
  get<T>(apiPath: string): Promise<T>;
  /** Stops the server and removes its files; idempotent. */
  stop(): Promise<void>;
}

interface ApiAnswer<T> {
  status: 'success' | 'error';
  data: T;
  errorType?: string;
  error?: string;
}

export async function startPrometheus(config: object, timeoutMs = 15_000): Promise<PrometheusServer> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hr-prometheus-'));
  const configFile = path.join(dir, 'prometheus.yml');
  fs.writeFileSync(configFile, toYaml(config));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(
    'prometheus',
    [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // No pid: it never started (spawn failed), so there is nothing to wait for.
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const killer = setTimeout(() => child.kill('SIGKILL'), 5000);
        await exited;
        clearTimeout(killer);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    })());

  const get = async <T>(apiPath: string): Promise<T> => {
    const response = await fetch(`${url}${apiPath}`, { signal: AbortSignal.timeout(5000) });
    const answer = (await response.json()) as ApiAnswer<T>;
    if (answer.status !== 'success') throw new Error(`GET ${apiPath}: ${answer.errorType}: ${answer.error}`);
    return answer.data;
  };

  try {
    await new Promise<void>((resolve, reject) => {
      const deadline = Date.now() + timeoutMs;
      child.once('error', (error: NodeJS.ErrnoException) =>
        reject(error.code === 'ENOENT' ? new Error('prometheus is not on the PATH: apt-get install prometheus (.ci/run does it)') : error),
      );
      child.once('exit', (code) => reject(new Error(`prometheus exited with ${code}: ${stderr}`)));
      const poll = () => {
        fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).then(
          (response) => (response.ok ? resolve() : retry()),
          () => retry(),
        );
      };
      const retry = () => {
        if (Date.now() > deadline) reject(new Error(`prometheus not ready after ${timeoutMs} ms: ${stderr}`));
        else setTimeout(poll, 100).unref();
      };
      poll();
    });
  } catch (error) {
    await stop();
    throw error;
  }

  return {
    url,
    get,
    query: async (expr) => {
      const data = await get<{ resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] }>(
        `/api/v1/query?query=${encodeURIComponent(expr)}`,
      );
      if (data.resultType !== 'vector') throw new Error(`${expr}: a ${data.resultType}, not an instant vector`);
      return data.result;
    },
    stop,
  };
}
