/**
 * Integration handlers for the simulated banks (sim/src/bank): run a worker with
 *   HEADROOM_BANK_URL=http://127.0.0.1:8090 node worker/dist/src/cli.js --handlers sim/dist/src/handlers/bank.js ...
 *
 * The integration names the bank (bank-a, bank-b, ...). A task, for the account named by its
 * key: GET the account, then its transaction pages (the first, then the others, up to
 * `maxPages`, in parallel), all through the worker's shared HTTP agent (task.httpAgent) and
 * under the task's abort signal; it categorises and sums the transactions, gzips a debugging
 * record of what it fetched, and answers a small JSON summary. Mostly waiting on the network,
 * with a little CPU, like the real thing.
 *
 * Payload: empty, or a JSON object with any of
 *   accountId          the account (default: the task's key)
 *   maxPages           1-10 pages of transactions at most (default 4; accounts have 2-4)
 *   upstreamTimeoutMs  each call's timeout, waiting for a connection included (default 10000)
 *   leak               true: leak this task's data (as the "-leaky" integrations do)
 *   sleepMs            ignored (the load generator sends it for the demo handlers)
 * Other fields, or bad values, fail the task with HR_ERR_INVALID_PAYLOAD naming the field.
 *
 * Leaky variant: an integration named <bank>-leaky (e.g. bank-a-leaky) calls <bank> and then
 * leaks, on purpose, the data it fetched (see settlement-leak.ts): heap grows by about 0.25 MiB a
 * task (4 pages) until an estimated 256 MiB are held, then stops leaking. So does any bank
 * integration given the payload {"leak": true}, and every task of a worker started with
 * HEADROOM_BANK_LEAK=1 (a build with the bug, e.g. on the candidate cluster alone).
 *
 * Every call names the worker's cluster in the x-headroom-cluster header, so that an incident
 * of the simulator can touch one cluster's calls alone (sim/src/bank/incidents.ts).
 *
 * Upstream failures become TaskFailedError with codes of upstream-call.ts:
 * HR_ERR_UPSTREAM_UNAVAILABLE (5xx, outage, refused connection; with the upstream's
 * Retry-After), HR_ERR_UPSTREAM_TIMEOUT, HR_ERR_UPSTREAM_REJECTED (4xx, e.g. unknown bank),
 * HR_ERR_UPSTREAM_BAD_RESPONSE.
 */
import { z } from 'zod';
import { ConfigError } from '@headroom/common';
import { TaskFailedError, type HandlerMap, type TaskContext } from '@headroom/worker';
import { clusterHeader } from '../bank/incidents';
import { accountIdPattern, accountIdRule, accountPath, bankAccountSchema, transactionsPageSchema, transactionsPath, type BankTransaction } from '../bank/api';
import { summarise } from './bank-statement';
import { compressDebugRecord } from './debug-payload';
import { invalidPayloadCode } from './demo';
import { SettlementWatch, defaultLeakCapBytes, estimateRetainedBytes, type LeakStats } from './settlement-leak';
import { getUpstreamJson, type UpstreamAnswer, type UpstreamCallOptions } from './upstream-call';

export const bankUrlEnv = 'HEADROOM_BANK_URL';
/** 1: every task of these handlers leaks (a build with the bug); 0 or unset: only the leaky variants. */
export const bankLeakEnv = 'HEADROOM_BANK_LEAK';
export const defaultBankUrl = 'http://127.0.0.1:8090';
/** Integrations ending so leak on purpose. */
export const leakySuffix = '-leaky';

/** @default values of a task's payload. */
export const bankTaskDefaults = { maxPages: 4, upstreamTimeoutMs: 10_000 } as const;
/** The largest answer a call reads: bounds one task's memory. */
export const maxUpstreamResponseBytes = 1024 * 1024;

const bankPayloadSchema = z
  .object({
    accountId: z
      .string({ error: `expected ${accountIdRule}` })
      .regex(accountIdPattern, `expected ${accountIdRule}`)
      .optional(),
    maxPages: z
      .number({ error: 'expected a whole number from 1 to 10' })
      .int('expected a whole number from 1 to 10')
      .min(1, 'expected a whole number from 1 to 10')
      .max(10, 'expected a whole number from 1 to 10')
      .optional(),
    upstreamTimeoutMs: z
      .number({ error: 'expected whole milliseconds from 1 to 600000' })
      .int('expected whole milliseconds from 1 to 600000')
      .min(1, 'expected whole milliseconds from 1 to 600000')
      .max(600_000, 'expected whole milliseconds from 1 to 600000')
      .optional(),
    leak: z.boolean({ error: 'expected true or false' }).optional(),
    /** What the load generator adds for the demo handlers: ignored here, the bank's own latency stands in for it. */
    sleepMs: z.number({ error: 'expected milliseconds (ignored)' }).optional(),
  })
  .strict();

type BankPayload = z.output<typeof bankPayloadSchema>;

/** The base URL of the bank upstream from HEADROOM_BANK_URL (default http://127.0.0.1:8090), without a trailing slash. */
export function readBankUrl(env: NodeJS.ProcessEnv = process.env): string {
  const raw = env[bankUrlEnv];
  if (raw === undefined || raw === '') return defaultBankUrl;
  const problem = new ConfigError(`${bankUrlEnv}: got ${JSON.stringify(raw)}, expected an http(s) URL without query or credentials, such as ${defaultBankUrl}`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw problem;
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '')
    throw problem;
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
}

/** Whether HEADROOM_BANK_LEAK asks every task to leak. */
export function readBankLeak(env: NodeJS.ProcessEnv = process.env): boolean {
  const raw = env[bankLeakEnv];
  if (raw === undefined || raw === '' || raw === '0' || raw === 'false') return false;
  if (raw === '1' || raw === 'true') return true;
  throw new ConfigError(`${bankLeakEnv}: got ${JSON.stringify(raw)}, expected 1 or true (every task leaks), 0, false or unset (only the leaky variants)`);
}

function parsePayload(task: TaskContext): BankPayload {
  if (task.payload.length === 0) return {};
  let json: unknown;
  try {
    json = JSON.parse(task.payload.toString('utf8'));
  } catch {
    throw new TaskFailedError(invalidPayloadCode, 'payload: not JSON, expected empty or a JSON object such as {"maxPages": 3}');
  }
  const parsed = bankPayloadSchema.safeParse(json);
  if (parsed.success) return parsed.data;
  const problems = parsed.error.issues.map((issue) =>
    issue.code === 'unrecognized_keys'
      ? `${issue.keys.join(', ')}: unknown field(s), expected accountId, maxPages, upstreamTimeoutMs, leak, sleepMs`
      : `${issue.path.join('.') || 'payload'}: ${issue.message}`,
  );
  throw new TaskFailedError(invalidPayloadCode, problems.join('; '));
}

export interface BankHandlersOptions {
  /** Base URL of the bank upstream, e.g. http://127.0.0.1:8090. */
  bankUrl: string;
  /** @default 256 MiB: what the leaky variant holds at most. */
  leakCapBytes?: number;
  /** Every task leaks, whatever its integration and payload (a build with the bug). @default false */
  leakEveryTask?: boolean;
}

export interface BankHandlers {
  handlers: HandlerMap;
  leakStats(): LeakStats;
  /** Lets go of what the leaky variant holds (tests). */
  releaseLeaked(): void;
}

export function createBankHandlers(options: BankHandlersOptions): BankHandlers {
  const settlements = new SettlementWatch(options.leakCapBytes ?? defaultLeakCapBytes);

  async function pullAccount(task: TaskContext, signal: AbortSignal): Promise<string> {
    const payload = parsePayload(task);
    const leakyIntegration = task.integration.endsWith(leakySuffix);
    const bank = leakyIntegration ? task.integration.slice(0, -leakySuffix.length) : task.integration;
    const leaks = leakyIntegration || payload.leak === true || options.leakEveryTask === true;
    const accountId = payload.accountId ?? task.key;
    if (!accountIdPattern.test(accountId))
      throw new TaskFailedError(invalidPayloadCode, `accountId: got ${JSON.stringify(accountId)} (the task's key), expected ${accountIdRule}`);
    const call: UpstreamCallOptions = {
      dispatcher: task.httpAgent,
      signal,
      timeoutMs: payload.upstreamTimeoutMs ?? bankTaskDefaults.upstreamTimeoutMs,
      maxResponseBytes: maxUpstreamResponseBytes,
      headers: { [clusterHeader]: task.cluster },
    };
    const startedAt = performance.now();

    const account = await getUpstreamJson(options.bankUrl + accountPath(bank, accountId), bankAccountSchema, call);
    const pageCount = Math.min(account.value.transactionPages, payload.maxPages ?? bankTaskDefaults.maxPages);
    const getPage = (page: number) => getUpstreamJson(options.bankUrl + transactionsPath(bank, accountId, page), transactionsPageSchema, call);
    const pages: UpstreamAnswer<z.output<typeof transactionsPageSchema>>[] = [];
    if (pageCount > 0) pages.push(await getPage(1));
    // The other pages at once (at most 9), and all of them settled before the task ends, so no call outlives it.
    const others = await Promise.allSettled(Array.from({ length: Math.max(0, pageCount - 1) }, (_, i) => getPage(i + 2)));
    for (const other of others) {
      if (other.status === 'rejected') throw other.reason;
      pages.push(other.value);
    }

    const transactions: BankTransaction[] = pages.flatMap((page) => page.value.transactions);
    const summary = summarise(account.value, transactions);
    const answers = [account, ...pages];
    const debug = await compressDebugRecord({
      taskId: task.id,
      calls: answers.map((answer, i) => ({
        url: i === 0 ? accountPath(bank, accountId) : transactionsPath(bank, accountId, i),
        durationMs: answer.durationMs,
        bytes: answer.text.length,
      })),
      account: account.value,
      transactions,
      summary,
    });
    signal.throwIfAborted();
    const leaked =
      leaks &&
      settlements.watch(
        { answers, transactions, debug },
        estimateRetainedBytes(
          answers.map((answer) => answer.text),
          debug.gzip.length,
        ),
      );
    return JSON.stringify({
      bank,
      accountId,
      pages: pages.length,
      upstreamCalls: answers.length,
      upstreamBytes: answers.reduce((sum, answer) => sum + answer.text.length, 0),
      runMs: Math.round(performance.now() - startedAt),
      summary,
      debugRecordBytes: debug.jsonBytes,
      debugRecordGzipBytes: debug.gzip.length,
      ...(leaks ? { leaked } : {}),
    });
  }

  return {
    handlers: { '*': pullAccount },
    leakStats: () => settlements.stats(),
    releaseLeaked: () => settlements.release(),
  };
}

const fromEnv = createBankHandlers({ bankUrl: readBankUrl(process.env), leakEveryTask: readBankLeak(process.env) });

/** For the worker's --handlers: every integration is a bank, named as the simulator names it. */
export const handlers: HandlerMap = fromEnv.handlers;
/** What the leaky variant of `handlers` holds. */
export const leakStats = fromEnv.leakStats;
