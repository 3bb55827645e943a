/**
 * Property-based fuzz of Balancer.Submit at the wire level: tasks are encoded by hand, so they
 * can carry what a generated client never sends (invalid UTF-8, unknown enum numbers, negative
 * int64 deadlines). A model says which field, if any, is wrong; the balancer must answer
 * exactly that: INVALID_ARGUMENT naming the field, or, for a valid task, its result. Never a
 * crash, never a hang (every call has a deadline), and nothing malformed reaches a worker.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { startFleet } from '@headroom/testkit';

const maxPayloadBytes = 1000;
const maxTaskTimeoutMs = 60_000;

/** One field of a task as bytes on the wire, and whether the balancer should accept it. */
interface FieldCase {
  /** The encoded field (tag, length, value); empty when the field is left out. */
  bytes: Buffer;
  valid: boolean;
  /** What the case is, for a failure message. */
  label: string;
}

function varint(value: bigint): Buffer {
  // int64 on the wire: a negative value is its 64-bit two's complement (10 bytes).
  let v = BigInt.asUintN(64, value);
  const bytes: number[] = [];
  do {
    const low = Number(v & 0x7fn);
    v >>= 7n;
    bytes.push(v > 0n ? low | 0x80 : low);
  } while (v > 0n);
  return Buffer.from(bytes);
}

const lengthDelimited = (field: number, value: Buffer) => Buffer.concat([varint(BigInt((field << 3) | 2)), varint(BigInt(value.length)), value]);
const varintField = (field: number, value: bigint) => Buffer.concat([varint(BigInt(field << 3)), varint(value)]);

/** Each field is valid 4 times in 5, so that about a quarter of the tasks are valid throughout. */
function mostlyValid<T>(valid: fc.Arbitrary<T>, ...invalid: fc.Arbitrary<T>[]): fc.Arbitrary<T> {
  return fc.oneof({ arbitrary: valid, weight: 4 * invalid.length }, ...invalid.map((arbitrary) => ({ arbitrary, weight: 1 })));
}

/** Text that is valid UTF-8 of 1..maxBytes bytes (no U+FFFD, which the balancer reads as "was invalid"). */
const validText = (maxBytes: number) =>
  fc
    .string({ unit: 'binary', minLength: 1, maxLength: maxBytes })
    .filter((s) => !s.includes('\uFFFD') && Buffer.byteLength(s) <= maxBytes && Buffer.byteLength(s) > 0);

function textField(field: number, name: string, maxBytes: number): fc.Arbitrary<FieldCase> {
  return mostlyValid<FieldCase>(
    validText(maxBytes).map((s) => ({ bytes: lengthDelimited(field, Buffer.from(s)), valid: true, label: `${name} ok` })),
    fc.constant({ bytes: Buffer.alloc(0), valid: false, label: `${name} missing` }),
    fc
      .integer({ min: maxBytes + 1, max: maxBytes * 8 })
      .map((n) => ({ bytes: lengthDelimited(field, Buffer.alloc(n, 0x61)), valid: false, label: `${name} ${n} bytes` })),
    fc.uint8Array({ minLength: 1, maxLength: 20 }).map((junk) => ({
      bytes: lengthDelimited(field, Buffer.concat([Buffer.from('a'), Buffer.from([0xff, 0xfe]), Buffer.from(junk)])),
      valid: false,
      label: `${name} invalid UTF-8`,
    })),
  );
}

const integrationField: fc.Arbitrary<FieldCase> = mostlyValid<FieldCase>(
  // Only "echo" among valid names: the demo handlers answer it at once with the payload.
  fc.constant({ bytes: lengthDelimited(3, Buffer.from('echo')), valid: true, label: 'integration ok' }),
  fc.constant({ bytes: Buffer.alloc(0), valid: false, label: 'integration missing' }),
  fc
    .constantFrom('Bank-A', 'bank a', '<img src=x onerror=alert(1)>', '-bank', 'x'.repeat(65), 'bänk', '../etc')
    .map((name) => ({ bytes: lengthDelimited(3, Buffer.from(name)), valid: false, label: `integration ${JSON.stringify(name)}` })),
  fc.constant({ bytes: lengthDelimited(3, Buffer.from([0x62, 0xff])), valid: false, label: 'integration invalid UTF-8' }),
);

const priorityField: fc.Arbitrary<FieldCase> = mostlyValid<FieldCase>(
  fc.constantFrom(1n, 2n).map((p) => ({ bytes: varintField(4, p), valid: true, label: `priority ${p}` })),
  fc.constant({ bytes: Buffer.alloc(0), valid: false, label: 'priority unspecified' }),
  fc
    .oneof(fc.bigInt({ min: 3n, max: 2n ** 31n - 1n }), fc.bigInt({ min: -(2n ** 31n), max: -1n }))
    .map((p) => ({ bytes: varintField(4, p), valid: false, label: `priority ${p}` })),
);

const payloadField: fc.Arbitrary<FieldCase> = mostlyValid<FieldCase>(
  fc
    .uint8Array({ maxLength: maxPayloadBytes })
    .map((p) => ({ bytes: p.length ? lengthDelimited(5, Buffer.from(p)) : Buffer.alloc(0), valid: true, label: `payload ${p.length} bytes` })),
  fc
    .integer({ min: maxPayloadBytes + 1, max: maxPayloadBytes * 20 })
    .map((n) => ({ bytes: lengthDelimited(5, Buffer.alloc(n)), valid: false, label: `payload ${n} bytes` })),
);

/** Deadlines relative to when the case runs: generated as offsets, encoded at send time. */
// An expired deadline (well formed, passed) is refused as DEADLINE_EXCEEDED, not as malformed.
type DeadlineCase = { offsetMs: bigint | null; absolute?: bigint; valid: boolean; expired?: true; label: string };
const deadlineField: fc.Arbitrary<DeadlineCase> = mostlyValid<DeadlineCase>(
  fc.oneof(
    fc.constant({ offsetMs: null, valid: true, label: 'deadline default' }),
    fc.bigInt({ min: 5_000n, max: BigInt(maxTaskTimeoutMs - 5_000) }).map((ms) => ({ offsetMs: ms, valid: true, label: `deadline in ${ms} ms` })),
  ),
  fc.bigInt({ min: -(10n ** 9n), max: -1_000n }).map((ms) => ({ offsetMs: ms, valid: false, expired: true as const, label: `deadline ${-ms} ms ago` })),
  fc.bigInt({ min: BigInt(maxTaskTimeoutMs + 10_000), max: 10n ** 12n }).map((ms) => ({ offsetMs: ms, valid: false, label: `deadline in ${ms} ms` })),
  fc.bigInt({ min: -(2n ** 63n), max: -1n }).map((value) => ({ offsetMs: null, absolute: value, valid: false, label: `deadline ${value}` })),
  fc.constant({ offsetMs: null, absolute: 2n ** 63n - 1n, valid: false, label: 'deadline int64 max' }),
);

function encodeDeadline(deadline: DeadlineCase): Buffer {
  if (deadline.absolute !== undefined) return varintField(6, deadline.absolute);
  if (deadline.offsetMs === null) return Buffer.alloc(0);
  return varintField(6, BigInt(Date.now()) + deadline.offsetMs);
}

test(
  'fuzz: any malformed task gets INVALID_ARGUMENT naming the first bad field; valid ones run; nothing else reaches a worker',
  { timeout: 120_000 },
  async (t) => {
    const fleet = await startFleet(t);
    const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
    await fleet.addBalancer({ maxPayloadBytes, maxTaskTimeoutMs });
    const raw = new grpc.Client(fleet.balancers[0]!.address, grpc.credentials.createInsecure());
    t.after(() => raw.close());
    const send = (request: Buffer) =>
      new Promise<{ error: grpc.ServiceError | null; response: Buffer | undefined }>((resolve) =>
        raw.makeUnaryRequest(
          '/headroom.v1.Balancer/Submit',
          (b: Buffer) => b,
          (b: Buffer) => b,
          request,
          { deadline: Date.now() + 5000 },
          (error, response) => resolve({ error, response }),
        ),
      );

    let accepted = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        textField(1, 'task.id', 128),
        textField(2, 'task.key', 256),
        integrationField,
        priorityField,
        payloadField,
        deadlineField,
        fc.boolean(),
        async (id, key, integration, priority, payload, deadline, idempotent) => {
          const fields: [string, { valid: boolean; label: string }][] = [
            ['task.id', id],
            ['task.key', key],
            ['task.integration', integration],
            ['task.priority', priority],
            ['task.payload', payload],
            ['task.deadlineUnixMs', deadline],
          ];
          const taskBytes = Buffer.concat([
            id.bytes,
            key.bytes,
            integration.bytes,
            priority.bytes,
            payload.bytes,
            encodeDeadline(deadline),
            idempotent ? varintField(7, 1n) : Buffer.alloc(0),
          ]);
          const { error } = await send(lengthDelimited(1, taskBytes));
          const firstBad = fields.find(([, field]) => !field.valid);
          const description = fields.map(([, field]) => field.label).join(', ');
          if (!firstBad) {
            assert.equal(error, null, `a valid task was refused (${description}): ${error?.details}`);
            accepted++;
            return;
          }
          assert.ok(error, `accepted a task with ${firstBad[1].label} (${description})`);
          if (firstBad[1] === deadline && deadline.expired) {
            assert.equal(error.code, grpc.status.DEADLINE_EXCEEDED, `${description}: ${grpc.status[error.code]} ${error.details}`);
            assert.ok(error.details.startsWith('HR_ERR_DEADLINE_EXCEEDED: task.deadlineUnixMs:'), `${description}: "${error.details}"`);
            refused++;
            return;
          }
          assert.equal(error.code, grpc.status.INVALID_ARGUMENT, `${description}: ${grpc.status[error.code]} ${error.details}`);
          assert.ok(error.details.startsWith(`HR_ERR_INVALID_TASK: ${firstBad[0]}:`), `${description}: "${error.details}" should name ${firstBad[0]}`);
          assert.equal(String(error.metadata.get('headroom-error-code')[0]), 'HR_ERR_INVALID_TASK');
          refused++;
        },
      ),
      { numRuns: 300, includeErrorInReport: true, seed: Number(process.env.HEADROOM_FUZZ_SEED ?? Date.now() % 2 ** 31) },
    );
    t.diagnostic(`${accepted} valid tasks ran, ${refused} malformed ones refused`);
    assert.ok(accepted > 10 && refused > 100, `the generators cover both sides: ${accepted} accepted, ${refused} refused`);
    assert.equal(worker.stats().completed, accepted, 'exactly the valid tasks reached the worker');
    assert.equal(worker.stats().failed, 0);
    assert.equal(fleet.balancers[0]!.stats().queue.queued, 0);
  },
);
