import type { Response } from 'express';
import { HeadroomError } from '@headroom/common';
import { apiErrorCodes } from './errors';
import type { ControlMetrics } from './metrics';

/** A stream whose client reads slower than this many bytes behind is dropped. */
const maxBufferedBytesPerStream = 1024 * 1024;

/**
 * Server-sent events for the UI: `change` (an audit entry), `ack` (a balancer applied an
 * override), `figures` (clusters, balancers, override: sent periodically while anyone listens).
 * Bounded: at most `maxStreams` open, and a stream that falls behind is closed.
 */
export class EventHub {
  private readonly streams = new Set<Response>();

  constructor(
    private readonly maxStreams: number,
    private readonly metrics: ControlMetrics,
  ) {}

  get size(): number {
    return this.streams.size;
  }

  /** Takes over the response; throws HR_ERR_TOO_MANY_STREAMS when full. */
  open(response: Response): void {
    if (this.streams.size >= this.maxStreams) {
      throw new HeadroomError(apiErrorCodes.tooManyStreams, `${this.maxStreams} event streams are open already (maxEventStreams); try again later`, {
        retryAfterMs: 5000,
      });
    }
    response.status(200);
    response.setHeader('content-type', 'text/event-stream; charset=utf-8');
    response.setHeader('cache-control', 'no-cache, no-transform');
    response.setHeader('x-accel-buffering', 'no');
    response.flushHeaders();
    response.write('retry: 2000\n\n');
    this.streams.add(response);
    this.metrics.eventStreams.set(this.streams.size);
    response.on('close', () => {
      this.streams.delete(response);
      this.metrics.eventStreams.set(this.streams.size);
    });
  }

  send(response: Response, event: string, data: unknown): void {
    if (response.writableLength > maxBufferedBytesPerStream) {
      response.destroy();
      return;
    }
    response.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  broadcast(event: string, data: unknown): void {
    for (const stream of this.streams) this.send(stream, event, data);
  }

  closeAll(): void {
    for (const stream of this.streams) stream.end();
    this.streams.clear();
    this.metrics.eventStreams.set(0);
  }
}
