import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { GrpcMessageReader } from '../src/grpc-message-reader';

function frame(message: Buffer, flag = 0): Buffer {
  const prefix = Buffer.alloc(5);
  prefix[0] = flag;
  prefix.writeUInt32BE(message.length, 1);
  return Buffer.concat([prefix, message]);
}

function readAll(reader: GrpcMessageReader, chunks: Buffer[]) {
  const messages: Buffer[] = [];
  for (const chunk of chunks) {
    const failure = reader.push(chunk, (message) => messages.push(Buffer.from(message)));
    if (failure) return { messages, failure };
  }
  return { messages, failure: undefined };
}

test('messages come whole however the chunks split them: prefix, body, or several in one chunk', () => {
  const first = Buffer.from('first message');
  const second = Buffer.alloc(1000, 3);
  const empty = Buffer.alloc(0);
  const stream = Buffer.concat([frame(first), frame(empty), frame(second)]);
  for (const size of [1, 2, 3, 4, 5, 6, 7, 17, 64, 999, stream.length]) {
    const chunks: Buffer[] = [];
    for (let offset = 0; offset < stream.length; offset += size) chunks.push(stream.subarray(offset, offset + size));
    const reader = new GrpcMessageReader(1 << 20);
    const { messages, failure } = readAll(reader, chunks);
    assert.equal(failure, undefined);
    assert.deepEqual(messages, [first, empty, second], `chunks of ${size} bytes`);
    assert.equal(reader.partial, false);
  }
});

test('a message whole in its chunk is not copied', () => {
  const chunk = frame(Buffer.from('in place'));
  let seen: Buffer | undefined;
  new GrpcMessageReader(100).push(chunk, (message) => (seen = message));
  assert.equal(seen!.buffer, chunk.buffer, 'a view of the chunk');
});

test('a message over the limit is refused on its prefix, before anything is buffered; compressed or unknown flags are refused', () => {
  const reader = new GrpcMessageReader(10);
  assert.deepEqual(readAll(reader, [frame(Buffer.alloc(11)).subarray(0, 7)]).failure, { kind: 'too-large', bytes: 11 });
  assert.deepEqual(readAll(new GrpcMessageReader(10), [frame(Buffer.alloc(10))]).failure, undefined);
  assert.deepEqual(readAll(new GrpcMessageReader(10), [frame(Buffer.alloc(2), 1)]).failure, { kind: 'compressed' });
  assert.deepEqual(readAll(new GrpcMessageReader(10), [frame(Buffer.alloc(2), 9)]).failure, { kind: 'bad-flag', flag: 9 });
  // A length of 4 GiB - 1 is refused without allocating it.
  const huge = Buffer.from([0, 0xff, 0xff, 0xff, 0xff]);
  assert.deepEqual(readAll(new GrpcMessageReader(1 << 20), [huge.subarray(0, 2), huge.subarray(2)]).failure, { kind: 'too-large', bytes: 0xffffffff });
});

test('a stream that stops mid-message is seen as partial', () => {
  const reader = new GrpcMessageReader(100);
  readAll(reader, [frame(Buffer.alloc(20)).subarray(0, 12)]);
  assert.equal(reader.partial, true);
  const prefixOnly = new GrpcMessageReader(100);
  readAll(prefixOnly, [Buffer.from([0, 0])]);
  assert.equal(prefixOnly.partial, true);
});
