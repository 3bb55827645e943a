/** The audit outbox's rules, without a network: bounded, in order, written once the store takes entries again. */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { Counter, Gauge, Registry } from 'prom-client';
import type { Logger } from '@headroom/common';
import type { RedisConnection } from '@headroom/fleet';
import { AuditLog } from '../src/audit';
import type { AuditEntry, NewAuditEntry } from '../src/record/audit-entry';
import type { AuditStore, TimedAuditEntry } from '../src/record/audit-store';
import type { Database } from '../src/record/database';

function harness(outboxMaxEntries: number) {
  const state = { up: false, written: [] as AuditEntry[], published: [] as string[], errors: [] as { fields: unknown; message: string }[] };
  const store = {
    async insert(_on: unknown, entry: TimedAuditEntry): Promise<AuditEntry> {
      if (!state.up) throw new Error('connect ECONNREFUSED');
      const written = { ...entry, id: String(state.written.length + 1) };
      state.written.push(written);
      return written;
    },
  } as unknown as AuditStore;
  const redis = { publish: async (_channel: string, message: string) => (state.published.push(message), 1) } as unknown as RedisConnection;
  const quiet = () => undefined;
  const logger = {
    debug: quiet,
    info: quiet,
    warn: quiet,
    error: (fields: unknown, message: string) => state.errors.push({ fields, message }),
  } as unknown as Logger;
  const registry = new Registry();
  const metrics = {
    outboxDepth: new Gauge({ name: 'depth', help: 'depth', registers: [registry] }),
    outboxDropped: new Counter({ name: 'dropped', help: 'dropped', registers: [registry] }),
  };
  const audit = new AuditLog({ database: { pool: {} } as unknown as Database, store, redis, keyPrefix: 'test', outboxMaxEntries, metrics, logger });
  const figure = async (name: string) => (await registry.getSingleMetric(name)!.get()).values[0]?.value ?? 0;
  return { state, audit, figure };
}

const entry = (target: string): NewAuditEntry => ({ actor: 'olga', action: 'rollback', target, before: null, after: null, outcome: 'ok' });

test('while the store is away entries wait, at most outboxMaxEntries; past that they are dropped, counted and logged', async (t) => {
  const { state, audit, figure } = harness(2);
  t.after(() => audit.close());
  for (const target of ['a', 'b', 'c']) await audit.record(entry(target));
  assert.equal(audit.outboxDepth, 2);
  assert.equal(await figure('depth'), 2);
  assert.equal(await figure('dropped'), 1);
  assert.equal(state.errors.length, 1);
  assert.equal((state.errors[0]!.fields as { entry: TimedAuditEntry }).entry.target, 'c', 'the dropped entry is in the error log');

  // Still away: a new entry finds the outbox full too.
  await audit.record(entry('c2'));
  assert.equal(await figure('dropped'), 2);
  // Back: the waiting ones are written first, then the new one, so the record keeps the order things happened in.
  state.up = true;
  await audit.record(entry('d'));
  assert.deepEqual(
    state.written.map((e) => e.target),
    ['a', 'b', 'd'],
  );
  assert.ok(state.written[0]!.atUnixMs <= state.written[2]!.atUnixMs, 'each keeps the time it happened');
  assert.equal(await figure('depth'), 0);
  assert.deepEqual(
    state.published.map((json) => (JSON.parse(json) as AuditEntry).target),
    ['a', 'b', 'd'],
    'announced as written',
  );

  // Straight through while the store answers.
  await audit.record(entry('e'));
  assert.deepEqual(
    state.written.map((e) => e.target),
    ['a', 'b', 'd', 'e'],
  );
});

test('close() tries once more, then logs what is left at error level instead of losing it silently', async () => {
  const { state, audit, figure } = harness(10);
  await audit.record(entry('a'));
  await audit.close();
  assert.deepEqual(state.written, []);
  assert.deepEqual(
    state.errors.map((e) => [e.message, (e.fields as { entry: TimedAuditEntry }).entry.target]),
    [['stopping with an audit entry PostgreSQL never took', 'a']],
  );
  assert.equal(await figure('depth'), 0);
});
