/**
 * The debugging record a bank task keeps of what it fetched (in the real fleet it goes to
 * object storage): serialised and gzipped on libuv's thread pool, bounded in size.
 */
import { promisify } from 'node:util';
import * as zlib from 'node:zlib';

const gzip = promisify(zlib.gzip);

/** The most transactions a record quotes; the rest are counted. */
export const maxDebugTransactions = 500;
/** The longest record, serialised, that is compressed; a longer one keeps only its counts. */
export const maxDebugPayloadBytes = 1024 * 1024;

export interface DebugRecord {
  taskId: string;
  calls: readonly { url: string; durationMs: number; bytes: number }[];
  account: unknown;
  transactions: readonly unknown[];
  summary: unknown;
}

export interface CompressedDebugRecord {
  /** Length of the serialised record. */
  jsonBytes: number;
  gzip: Buffer;
}

export async function compressDebugRecord(record: DebugRecord): Promise<CompressedDebugRecord> {
  const quoted = record.transactions.slice(0, maxDebugTransactions);
  let json = JSON.stringify({ ...record, transactions: quoted, transactionsLeftOut: record.transactions.length - quoted.length });
  if (json.length > maxDebugPayloadBytes) {
    json = JSON.stringify({
      taskId: record.taskId,
      calls: record.calls.length,
      transactionsLeftOut: record.transactions.length,
      note: `record over ${maxDebugPayloadBytes} bytes`,
    });
  }
  return { jsonBytes: json.length, gzip: await gzip(json) };
}
