/**
 * The UI's parser of the control plane's event stream (read with fetch(), since EventSource
 * cannot send a token): events split across chunks anywhere, all three line endings.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { SseParser, maxEventChars, type ServerSentEvent } from '../src/api/sse-parser';

const stream = 'retry: 2000\n\nevent: figures\ndata: {"atUnixMs":1}\n\n: a comment\nevent: change\ndata: {"a":\ndata: 1}\n\ndata: plain\n\n';
const expected: ServerSentEvent[] = [
  { event: 'figures', data: '{"atUnixMs":1}' },
  { event: 'change', data: '{"a":\n1}' },
  { event: 'message', data: 'plain' },
];

test('events come out whole however the stream is cut into chunks', () => {
  for (let cut = 0; cut <= stream.length; cut++) {
    const parser = new SseParser();
    const events = [...parser.push(stream.slice(0, cut)), ...parser.push(stream.slice(cut))];
    assert.deepEqual(events, expected, `cut at ${cut}`);
    assert.equal(parser.retryMs, 2000);
  }
  const parser = new SseParser();
  assert.deepEqual(
    [...stream].flatMap((char) => parser.push(char)),
    expected,
    'one character at a time',
  );
});

test('\\r\\n and \\r end lines as \\n does, even when \\r\\n is split between chunks', () => {
  for (const ending of ['\r\n', '\r']) {
    const text = stream.replaceAll('\n', ending);
    for (let cut = 0; cut <= text.length; cut++) {
      const parser = new SseParser();
      assert.deepEqual(
        [...parser.push(text.slice(0, cut)), ...parser.push(''), ...parser.push(text.slice(cut))],
        expected,
        `${JSON.stringify(ending)} cut at ${cut}`,
      );
    }
  }
});

test('a field without a space after the colon, and an event with no data, which dispatches nothing', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push('event:ack\ndata:{"v":2}\n\nevent: nothing\n\n'), [{ event: 'ack', data: '{"v":2}' }]);
  assert.deepEqual(parser.push('data: next\n\n'), [{ event: 'message', data: 'next' }], 'the name of the empty event does not carry over');
});

test('an event larger than any the control plane sends is refused, not buffered without end', () => {
  const parser = new SseParser();
  const line = `data: ${'x'.repeat(1024 * 1024)}\n`;
  assert.throws(
    () => {
      for (let i = 0; i < 5; i++) parser.push(line);
    },
    new RegExp(`more than ${maxEventChars} characters`),
  );
});
