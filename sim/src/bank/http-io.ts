/** Reading and answering HTTP requests for the bank simulator: JSON in and out, bounded. */
import type * as http from 'node:http';
import { BankApiError, bankErrorCodes } from './errors';

/** The largest request body the simulator reads (incident control only needs a few hundred bytes). */
export const maxRequestBodyBytes = 16 * 1024;

export function sendJson(response: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers }).end(text);
}

export function sendError(response: http.ServerResponse, error: BankApiError, headers: http.OutgoingHttpHeaders = {}): void {
  const retryAfter = error.retryAfterMs === undefined ? {} : { 'retry-after': String(Math.max(1, Math.ceil(error.retryAfterMs / 1000))) };
  sendJson(response, error.httpStatus, { error: { code: error.code, message: error.message } }, { ...retryAfter, ...headers });
}

/** The request's body parsed as JSON; BankApiError when it is too large or not JSON. */
export async function readJsonBody(request: http.IncomingMessage, limitBytes = maxRequestBodyBytes): Promise<unknown> {
  const tooLarge = () => new BankApiError(bankErrorCodes.bodyTooLarge, `body: larger than ${limitBytes} bytes`);
  const declared = Number(request.headers['content-length'] ?? 0);
  if (declared > limitBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    length += chunk.length;
    if (length > limitBytes) throw tooLarge();
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') throw new BankApiError(bankErrorCodes.invalidRequest, 'body: missing, expected a JSON object');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new BankApiError(bankErrorCodes.invalidRequest, `body: not JSON, expected a JSON object such as {"bank": "bank-a", "kind": "outage"}`);
  }
}

/**
 * The query parameters, refusing any not in `allowed` and any given twice (the message names it).
 */
export function queryParams(url: URL, allowed: readonly string[]): Record<string, string> {
  const params: Record<string, string> = {};
  for (const [name, value] of url.searchParams) {
    if (!allowed.includes(name)) {
      throw new BankApiError(
        bankErrorCodes.invalidRequest,
        `${name}: unknown query parameter${allowed.length > 0 ? `, expected ${allowed.join(', ')}` : ', this path takes none'}`,
      );
    }
    if (name in params) throw new BankApiError(bankErrorCodes.invalidRequest, `${name}: given more than once`);
    params[name] = value;
  }
  return params;
}
