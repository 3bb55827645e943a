/** How the audit page words a change: what moved, from what to what. */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { describeChange } from '../src/pages/audit/describe-change';

test('a traffic change lists only the shares that moved', () => {
  const before = {
    enabled: true,
    defaultPercent: 10,
    integrations: { 'bank-a': { percent: 0, rolledBack: false }, 'bank-b': { percent: 5, rolledBack: false } },
  };
  const after = {
    enabled: true,
    defaultPercent: 10,
    integrations: { 'bank-a': { percent: 30, rolledBack: false }, 'bank-b': { percent: 5, rolledBack: false } },
  };
  assert.deepEqual(describeChange('traffic.set', before, after), ['integrations.bank-a.percent: 0 → 30']);
});

test('null reads as "none", a missing value as "—", lists as their items', () => {
  assert.deepEqual(describeChange('parallelism.set', { baseline: null, candidate: null }, { baseline: null, candidate: 7 }), ['candidate: none → 7']);
  assert.deepEqual(describeChange('worker.drain', null, { cluster: 'baseline', draining: true }), ['cluster: — → baseline', 'draining: — → true']);
  assert.deepEqual(describeChange('resume', { integrations: ['bank-a', 'bank-b'] }, { integrations: [] }), ['integrations: bank-a, bank-b → []']);
});

test('a rollback says what went back, to how many balancers, how fast, and who did not answer', () => {
  const after = { override: { version: 42, all: false, integrations: ['bank-c'] }, propagationMs: 4.9, acknowledged: 2, missing: ['b3'] };
  assert.deepEqual(describeChange('rollback', null, after), [
    'override version 42: bank-c to the baseline',
    'acknowledged by 2 balancers in 4.9 ms',
    'not acknowledged: b3',
  ]);
  assert.deepEqual(describeChange('rollback', null, { override: { version: 43, all: true, integrations: [] }, acknowledged: 1 }), [
    'override version 43: everything to the baseline',
    'acknowledged by 1 balancer',
  ]);
});

test('a resume says what stays rolled back; a rollback or resume that Unleash did not take says it is not durable', () => {
  const resumed = { override: { version: 44, all: false, integrations: [] }, propagationMs: 3, acknowledged: 2, missing: [], durable: 'done' };
  assert.deepEqual(describeChange('resume', { version: 43, all: true, integrations: [] }, resumed), [
    'override version 44: nothing rolled back now',
    'acknowledged by 2 balancers in 3 ms',
  ]);
  const partly = { override: { version: 45, all: false, integrations: ['bank-a'] }, acknowledged: 1, missing: [], durable: 'failed' };
  assert.deepEqual(describeChange('resume', null, partly), [
    'override version 45: still rolled back: bank-a',
    'acknowledged by 1 balancer',
    'not durable: Unleash was not updated',
  ]);
});

test('a change of many values is cut to a few lines and counts the rest', () => {
  const before = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`i${i}`, i]));
  const after = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`i${i}`, i + 1]));
  const lines = describeChange('traffic.set', before, after);
  assert.equal(lines.length, 6);
  assert.equal(lines[5], 'and 15 more');
});
