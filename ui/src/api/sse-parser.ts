/**
 * Server-sent events parsed from text chunks as they arrive (the event stream is read with
 * fetch(), since EventSource cannot send an Authorization header). Follows the WHATWG rules
 * the control plane relies on: lines end in \n, \r\n or \r; `event:` names the event, `data:`
 * lines join with \n, a blank line dispatches, lines starting with ":" are comments, `retry:`
 * sets the reconnection delay. A chunk may end anywhere, even between \r and \n.
 */

export interface ServerSentEvent {
  /** "message" when the event named none. */
  event: string;
  data: string;
}

/** A single event larger than this is not one the control plane sends: the stream is broken. */
export const maxEventChars = 4 * 1024 * 1024;

export class SseParser {
  private pending = '';
  private eventName = '';
  private dataLines: string[] = [];
  private dataChars = 0;
  /** The last `retry:` the server sent, in milliseconds. */
  retryMs: number | undefined;

  /** The last chunk ended with \r: a \n that starts the next one belongs to it. */
  private crEndedChunk = false;

  /** Feeds a chunk of text; returns the events it completed. Throws when one event grows past maxEventChars. */
  push(chunk: string): ServerSentEvent[] {
    if (chunk === '') return [];
    if (this.crEndedChunk && chunk.startsWith('\n')) chunk = chunk.slice(1);
    this.crEndedChunk = false;
    this.pending += chunk;
    const events: ServerSentEvent[] = [];
    let start = 0;
    for (;;) {
      const cr = this.pending.indexOf('\r', start);
      const lf = this.pending.indexOf('\n', start);
      if (cr === -1 && lf === -1) break;
      let end: number;
      let next: number;
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr;
        next = this.pending[cr + 1] === '\n' ? cr + 2 : cr + 1;
        // The line ends here, even if its \n is still to come (\r\n split between chunks).
        if (cr === this.pending.length - 1) this.crEndedChunk = true;
      } else {
        end = lf;
        next = lf + 1;
      }
      const event = this.line(this.pending.slice(start, end));
      if (event) events.push(event);
      start = next;
    }
    this.pending = this.pending.slice(start);
    if (this.pending.length + this.dataChars > maxEventChars) {
      throw new Error(`an event of more than ${maxEventChars} characters: not a stream the control plane sends`);
    }
    return events;
  }

  private line(line: string): ServerSentEvent | undefined {
    if (line === '') {
      if (this.dataLines.length === 0) {
        this.eventName = '';
        return undefined;
      }
      const event = { event: this.eventName || 'message', data: this.dataLines.join('\n') };
      this.eventName = '';
      this.dataLines = [];
      this.dataChars = 0;
      return event;
    }
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.eventName = value;
    else if (field === 'data') {
      this.dataLines.push(value);
      this.dataChars += value.length + 1;
    } else if (field === 'retry' && /^\d+$/.test(value)) this.retryMs = Number(value);
    return undefined;
  }
}
