/**
 * The simulated bank upstream: one HTTP server for several banks, each answering after a
 * latency drawn from its own distribution (a timer, not CPU), failing at its own rate, and
 * open to incidents switched on over HTTP or through the returned handle.
 *
 *   GET    /healthz
 *   GET    /banks                                        the banks and their latency profiles
 *   GET    /banks/{bank}/accounts/{id}                   an account (3-6 KiB of JSON)
 *   GET    /banks/{bank}/accounts/{id}/transactions?page=N   80-120 transactions (35-55 KiB)
 *   GET    /incidents                                    incidents in force
 *   POST   /incidents {"bank", "kind", "factor"?, "durationMs"?, "cluster"?}   see incidents.ts
 * A bank call may name its cluster in the x-headroom-cluster header: incidents that name a
 * cluster touch only its calls.
 *   DELETE /incidents[?bank=B][&kind=K]                  end all, or those matching
 */
import * as http from 'node:http';
import { randomInt } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { z } from 'zod';
import { ConfigError, once, parseConfig, settings, silentLogger, type Logger } from '@headroom/common';
import { accountIdPattern, accountIdRule, maxTransactionsPage } from './api';
import { accountDocument, transactionsPageDocument } from './bank-data';
import { bankProfileSchema, defaultBanks, drawLatencyMs, type BankProfile } from './banks';
import { BankApiError, bankErrorCodes } from './errors';
import { queryParams, readJsonBody, sendError, sendJson } from './http-io';
import { IncidentBoard, clusterHeader, type Incident, type IncidentFilter, type IncidentInput } from './incidents';
import { hashSeed, seededRandom } from './random';

/** @default values of the simulator's options. */
export const bankSimulatorDefaults = {
  host: '127.0.0.1',
  /** 0: any free port. */
  port: 8090,
  /** Every latency is multiplied by this: 0.1 runs the banks ten times as fast (tests). */
  timeScale: 1,
  /** Connections open at once; the server refuses more. */
  maxConnections: 4096,
} as const;

export const bankSimulatorOptionsSchema = z
  .object({
    host: z.string().min(1, 'expected a host name or address').default(bankSimulatorDefaults.host),
    port: settings.nonNegativeInt(65_535).default(bankSimulatorDefaults.port),
    banks: z
      .array(bankProfileSchema)
      .min(1, 'expected at least one bank')
      .max(64, 'expected at most 64 banks')
      .refine((banks) => new Set(banks.map((bank) => bank.name)).size === banks.length, 'expected banks of different names')
      .default(() => defaultBanks.map((bank) => ({ ...bank }))),
    /** Seeds latencies, errors and documents; default random (the simulator tells it). */
    seed: settings.nonNegativeInt(0xffff_ffff).optional(),
    timeScale: z.coerce
      .number({ error: 'expected a number > 0, e.g. 0.1' })
      .positive('expected a number > 0')
      .max(100, 'expected a number <= 100')
      .default(bankSimulatorDefaults.timeScale),
    maxConnections: settings.positiveInt(100_000).default(bankSimulatorDefaults.maxConnections),
  })
  .strict();

export type BankSimulatorOptions = z.input<typeof bankSimulatorOptionsSchema>;

export interface BankSimulatorStats {
  openConnections: number;
  /** The most connections open at once since the simulator started. */
  maxOpenConnections: number;
  requestsInFlight: number;
  requestsTotal: number;
}

export interface BankSimulator {
  /** e.g. http://127.0.0.1:8090: what HEADROOM_BANK_URL should say. */
  readonly url: string;
  readonly port: number;
  readonly seed: number;
  readonly timeScale: number;
  readonly banks: readonly BankProfile[];
  /** Switches an incident on (replacing one of the same bank and kind); ConfigError names a bad field. */
  setIncident(input: IncidentInput): Incident;
  /** Ends every incident, or those of one bank and/or kind; answers how many. */
  clearIncidents(filter?: IncidentFilter): number;
  incidents(): Incident[];
  stats(): BankSimulatorStats;
  /** Stops at once: waiting answers are dropped and connections closed. Idempotent. */
  close(): Promise<void>;
}

/** The longest any answer waits, whatever the profile, incidents and time scale say (timers overflow past 2^31 ms). */
const maxAnswerDelayMs = 3_600_000;

const notFound = (what: string) => new BankApiError(bankErrorCodes.notFound, what);
const invalid = (message: string) => new BankApiError(bankErrorCodes.invalidRequest, message);

function urlHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw invalid(`path: ${JSON.stringify(segment)} is not valid percent-encoding`);
  }
}

function parsePage(value: string | undefined): number {
  if (value === undefined) return 1;
  const page = Number(value);
  if (!/^\d+$/.test(value) || page < 1 || page > maxTransactionsPage) {
    throw invalid(`page: got ${JSON.stringify(value)}, expected a whole number from 1 to ${maxTransactionsPage}`);
  }
  return page;
}

export async function startBankSimulator(options: BankSimulatorOptions = {}, dependencies: { logger?: Logger } = {}): Promise<BankSimulator> {
  const config = parseConfig('bank simulator options', bankSimulatorOptionsSchema, options);
  const logger = dependencies.logger ?? silentLogger;
  const seed = config.seed ?? randomInt(0, 0x1_0000_0000);
  const banks = new Map(config.banks.map((bank) => [bank.name, bank]));
  // One stream per bank, so one bank's traffic does not change another's draws.
  const streams = new Map(config.banks.map((bank) => [bank.name, seededRandom(hashSeed(seed, bank.name, 'latency'))]));
  const board = new IncidentBoard([...banks.keys()]);
  const waiting = new Set<() => void>();
  const stats: BankSimulatorStats = { openConnections: 0, maxOpenConnections: 0, requestsInFlight: 0, requestsTotal: 0 };

  /** Waits `ms` unless the client goes away or the simulator closes; answers whether to answer. */
  const waitFor = (ms: number, response: http.ServerResponse) =>
    new Promise<boolean>((resolve) => {
      const finish = (answer: boolean) => {
        clearTimeout(timer);
        response.off('close', cancel);
        waiting.delete(cancel);
        resolve(answer);
      };
      const cancel = () => finish(false);
      const timer = setTimeout(() => finish(true), ms);
      waiting.add(cancel);
      response.once('close', cancel);
    });

  async function serveBank(request: http.IncomingMessage, response: http.ServerResponse, url: URL, segments: readonly string[]): Promise<void> {
    const [bankName, accountsSegment, accountId, transactionsSegment] = segments;
    const bank = banks.get(bankName!);
    if (!bank) throw notFound(`bank: no bank ${JSON.stringify(bankName)}, expected one of ${[...banks.keys()].join(', ')}`);
    if (
      accountsSegment !== 'accounts' ||
      accountId === undefined ||
      segments.length > 4 ||
      (transactionsSegment !== undefined && transactionsSegment !== 'transactions')
    ) {
      throw notFound(`path: ${url.pathname} is not a bank path; expected /banks/{bank}/accounts/{id} or /banks/{bank}/accounts/{id}/transactions?page=N`);
    }
    if (!accountIdPattern.test(accountId)) throw invalid(`id: got ${JSON.stringify(accountId)}, expected ${accountIdRule}`);
    let page: number | undefined;
    if (transactionsSegment === undefined) queryParams(url, []);
    else page = parsePage(queryParams(url, ['page']).page);

    const cluster = request.headers[clusterHeader];
    const { latencyFactor, outage } = board.effectOn(bank.name, typeof cluster === 'string' ? cluster : undefined);
    if (outage) {
      const retryAfterMs = outage.endsAtUnixMs === null ? 5000 : outage.endsAtUnixMs - Date.now();
      throw new BankApiError(bankErrorCodes.unavailable, `${bank.name} is in an outage`, { retryAfterMs });
    }
    // Every request draws the same three numbers, whatever happens next, so a seed replays a run.
    const random = streams.get(bank.name)!;
    const latencyMs = Math.min(maxAnswerDelayMs, drawLatencyMs(bank, random) * latencyFactor * config.timeScale);
    const fails = random() < bank.errorRate;
    const failStatus503 = random() < 0.5;
    if (!(await waitFor(latencyMs, response))) return;
    const headers = { 'x-bank-latency-ms': latencyMs.toFixed(1) };
    if (fails) {
      const error = failStatus503
        ? new BankApiError(bankErrorCodes.unavailable, `${bank.name} is temporarily unavailable`, { retryAfterMs: 1000 })
        : new BankApiError(bankErrorCodes.internal, `${bank.name} failed to answer`);
      sendError(response, error, headers);
      return;
    }
    const document = page === undefined ? accountDocument(seed, bank.name, accountId) : transactionsPageDocument(seed, bank.name, accountId, page);
    sendJson(response, 200, document, headers);
  }

  async function serveIncidents(request: http.IncomingMessage, response: http.ServerResponse, url: URL): Promise<void> {
    try {
      if (request.method === 'GET') {
        queryParams(url, []);
        sendJson(response, 200, { incidents: board.list() });
      } else if (request.method === 'POST') {
        queryParams(url, []);
        const incident = board.set(await readJsonBody(request));
        logger.info({ incident }, 'incident on');
        sendJson(response, 201, { incident });
      } else {
        const cleared = board.clear(queryParams(url, ['bank', 'kind']));
        logger.info({ cleared, filter: Object.fromEntries(url.searchParams) }, 'incidents cleared');
        sendJson(response, 200, { cleared });
      }
    } catch (error) {
      if (error instanceof ConfigError) throw invalid(error.message);
      throw error;
    }
  }

  async function serve(request: http.IncomingMessage, response: http.ServerResponse): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://bank.invalid');
    const segments = url.pathname.split('/').slice(1).map(decodeSegment);
    const route = segments[0] === 'banks' && segments.length > 1 ? 'bank' : url.pathname;
    const methods = route === '/incidents' ? ['GET', 'POST', 'DELETE'] : ['GET'];
    if (!['bank', '/incidents', '/banks', '/healthz'].includes(route))
      throw notFound(`path: no ${url.pathname} here; see /healthz, /banks, /banks/{bank}/accounts/{id}, /incidents`);
    if (!methods.includes(request.method ?? '')) {
      sendError(
        response,
        new BankApiError(bankErrorCodes.methodNotAllowed, `method: ${request.method} is not served at ${url.pathname}, expected ${methods.join(' or ')}`),
        { allow: methods.join(', ') },
      );
      return;
    }
    if (route === 'bank') return serveBank(request, response, url, segments.slice(1));
    if (route === '/incidents') return serveIncidents(request, response, url);
    queryParams(url, []);
    if (route === '/banks') sendJson(response, 200, { banks: [...banks.values()], timeScale: config.timeScale });
    else sendJson(response, 200, { status: 'ok', banks: [...banks.keys()] });
  }

  const server = http.createServer((request, response) => {
    stats.requestsInFlight++;
    stats.requestsTotal++;
    response.once('close', () => stats.requestsInFlight--);
    serve(request, response).catch((error: unknown) => {
      if (response.headersSent || response.destroyed) return;
      if (error instanceof BankApiError) {
        // An unread body would hold the connection: a refused upload ends it.
        sendError(response, error, error.code === bankErrorCodes.bodyTooLarge ? { connection: 'close' } : {});
        return;
      }
      logger.error({ err: error, url: request.url }, 'bank simulator failed to answer');
      sendJson(response, 500, { error: { code: bankErrorCodes.internal, message: 'the simulator failed' } });
    });
  });
  server.maxConnections = config.maxConnections;
  server.on('connection', (socket) => {
    stats.openConnections++;
    stats.maxOpenConnections = Math.max(stats.maxOpenConnections, stats.openConnections);
    socket.once('close', () => stats.openConnections--);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const close = once(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const cancel of [...waiting]) cancel();
    server.closeAllConnections();
    await closed;
  });
  return {
    url: `http://${urlHost(config.host)}:${port}`,
    port,
    seed,
    timeScale: config.timeScale,
    banks: [...banks.values()],
    setIncident: (input) => board.set(input),
    clearIncidents: (filter = {}) => board.clear(filter),
    incidents: () => board.list(),
    stats: () => ({ ...stats }),
    close,
  };
}
