import type { ApiClient } from './client';
import { SseParser, type ServerSentEvent } from './sse-parser';

export type StreamStatus =
  | { state: 'connecting' }
  | { state: 'live'; sinceUnixMs: number }
  | { state: 'retrying'; reason: string; retryAtUnixMs: number }
  /** The token is no longer accepted: retrying would not help. */
  | { state: 'refused'; reason: string };

export interface EventStreamHandlers {
  onEvent(event: ServerSentEvent): void;
  onStatus(status: StreamStatus): void;
}

const firstRetryDelayMs = 1000;
const maxRetryDelayMs = 15_000;
/**
 * The control plane sends figures every couple of seconds while a stream is open; this long
 * without a byte means the connection died without closing (a proxy, a sleeping laptop).
 */
const silenceLimitMs = 30_000;

/**
 * Follows GET /api/v1/events until `signal` aborts: reconnects with exponential backoff (with
 * jitter, so many open UIs do not reconnect in step) after any failure, and reports its state.
 */
export async function followEventStream(client: ApiClient, handlers: EventStreamHandlers, signal: AbortSignal): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    handlers.onStatus({ state: 'connecting' });
    let reason: string;
    const connection = new AbortController();
    let silenceTimer: ReturnType<typeof setTimeout> | undefined;
    const resetSilenceTimer = () => {
      clearTimeout(silenceTimer);
      silenceTimer = setTimeout(() => connection.abort(), silenceLimitMs);
    };
    try {
      resetSilenceTimer();
      const response = await client.fetch('/events', { signal: AbortSignal.any([signal, connection.signal]), headers: { accept: 'text/event-stream' } });
      if (response.status === 401) {
        handlers.onStatus({ state: 'refused', reason: await errorMessageOf(response) });
        return;
      }
      if (!response.ok || !response.body) {
        reason = `HTTP ${response.status}: ${await errorMessageOf(response)}`;
      } else {
        const parser = new SseParser();
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
        let live = false;
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          resetSilenceTimer();
          for (const event of parser.push(value)) {
            if (!live) {
              live = true;
              failures = 0;
              handlers.onStatus({ state: 'live', sinceUnixMs: Date.now() });
            }
            handlers.onEvent(event);
          }
        }
        reason = 'the control plane closed the event stream';
      }
    } catch (error) {
      if (signal.aborted) return;
      reason = connection.signal.aborted ? `nothing arrived for ${silenceLimitMs / 1000} s` : error instanceof Error ? error.message : String(error);
    } finally {
      clearTimeout(silenceTimer);
      connection.abort();
    }
    failures++;
    const delayMs = Math.min(maxRetryDelayMs, firstRetryDelayMs * 2 ** (failures - 1)) * (0.75 + Math.random() * 0.5);
    handlers.onStatus({ state: 'retrying', reason, retryAtUnixMs: Date.now() + delayMs });
    await sleep(delayMs, signal);
  }
}

async function errorMessageOf(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { error?: { message?: string } };
    return body.error?.message ?? response.statusText;
  } catch {
    return response.statusText;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}
