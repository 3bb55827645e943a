/** OwnTransportFaults and the error classification, driven by hand: no network, a fake clock and timers. */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { status } from '@grpc/grpc-js';
import pino from 'pino';
import { ownFaultOfError, ownFaultOfStatus } from '../src/connect-failures';
import { OwnTransportFaults, type OwnTransportProblem } from '../src/own-transport-faults';
import type { DispatchOutcome } from '../src/worker-channels';

const coded = (code: string, cause?: Error) => Object.assign(new Error(code, cause ? { cause } : {}), { code });

test("errors are told apart by their code: TLS and certificate failures are this side's; refused, reset, timed out are the worker's", () => {
  for (const code of [
    'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
    'SELF_SIGNED_CERT_IN_CHAIN',
    'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
    'CERT_HAS_EXPIRED',
    'ERR_TLS_CERT_ALTNAME_INVALID',
  ]) {
    assert.equal(ownFaultOfError(coded(code)), 'tls', code);
  }
  for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ERR_TLS_HANDSHAKE_TIMEOUT', 'ERR_HTTP2_STREAM_CANCEL']) {
    assert.equal(ownFaultOfError(coded(code)), undefined, code);
  }
  assert.equal(ownFaultOfError(new Error('certificate required')), undefined, 'never by the message');
  assert.equal(ownFaultOfError(undefined), undefined);
  assert.equal(ownFaultOfError(coded('ERR_HTTP2_STREAM_CANCEL', coded('SELF_SIGNED_CERT_IN_CHAIN'))), 'tls', "a stream cancelled by its session's TLS failure");
  assert.equal(ownFaultOfStatus(status.UNAUTHENTICATED, ''), 'auth');
  assert.equal(ownFaultOfStatus(status.PERMISSION_DENIED, ''), 'auth');
  assert.equal(ownFaultOfStatus(status.UNAUTHENTICATED, 'HR_ERR_SOMETHING'), undefined, "a worker's own coded answer");
  assert.equal(ownFaultOfStatus(status.UNAVAILABLE, ''), undefined);
});

function harness() {
  let nowMs = 0;
  const timers: { run: () => void; atMs: number; cancelled: boolean }[] = [];
  const changes: (OwnTransportProblem | undefined)[] = [];
  const counted: string[] = [];
  const logs: { level: number; msg: string; [key: string]: unknown }[] = [];
  const faults = new OwnTransportFaults(
    { notReadyAfterFaultsInARow: 3, readyAgainAfterMs: 30_000, logIntervalMs: 10_000 },
    {
      errors: { inc: (labels) => void counted.push(`${labels.cluster}/${labels.reason}`) },
      logger: pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) }),
      readinessChanged: (problem) => void changes.push(problem),
      nowMs: () => nowMs,
      setTimer: (run, delayMs) => {
        const timer = { run, atMs: nowMs + delayMs, cancelled: false };
        timers.push(timer);
        return { cancel: () => (timer.cancelled = true) };
      },
    },
  );
  const advance = (ms: number) => {
    nowMs += ms;
    for (const timer of timers.splice(0)) {
      if (timer.cancelled) continue;
      if (timer.atMs <= nowMs) timer.run();
      else timers.push(timer);
    }
  };
  return { faults, changes, counted, logs, advance };
}

const tlsFault: DispatchOutcome = { kind: 'not-started', unreachable: false, code: '', message: 'tlsv13 alert certificate required', ownFault: 'tls' };
const workerDown: DispatchOutcome = { kind: 'not-started', unreachable: true, code: '', message: 'connect ECONNREFUSED' };
const refused: DispatchOutcome = { kind: 'not-started', unreachable: false, code: 'HR_ERR_WORKER_FULL', message: 'full' };

test('not ready after 3 own faults in a row; a worker found down neither counts nor clears; an answer from a worker makes it ready', () => {
  const { faults, changes, counted, logs } = harness();
  faults.dispatchEnded('baseline', '10.0.0.1:7000', tlsFault);
  faults.dispatchEnded('baseline', '10.0.0.2:7000', workerDown);
  faults.dispatchEnded('baseline', '10.0.0.2:7000', tlsFault);
  assert.deepEqual(changes, []);
  faults.dispatchEnded('baseline', '10.0.0.3:7000', tlsFault);
  assert.equal(changes.length, 1);
  assert.deepEqual(changes[0], { reason: 'tls', cluster: 'baseline', address: '10.0.0.3:7000', error: 'tlsv13 alert certificate required', faultsInARow: 3 });
  assert.deepEqual(counted, ['baseline/tls', 'baseline/tls', 'baseline/tls']);
  // One error line per reason per interval, naming the address of the first call in it.
  const faultLines = logs.filter((l) => l.level === 50 && /own TLS/.test(l.msg) && l.address !== undefined && !/not ready/.test(l.msg));
  assert.equal(faultLines.length, 1);
  assert.equal(faultLines[0]!.address, '10.0.0.1:7000');
  faults.dispatchEnded('baseline', '10.0.0.2:7000', workerDown);
  assert.equal(faults.currentProblem?.reason, 'tls', 'a worker found down says nothing of this side');
  faults.dispatchEnded('baseline', '10.0.0.4:7000', refused);
  assert.equal(changes.length, 2);
  assert.equal(changes[1], undefined, 'ready again: a worker answered');
  assert.equal(faults.currentProblem, undefined);
});

test('not ready, with no call coming: ready again after readyAgainAfterMs without a new own fault, counted from the last one', () => {
  const { faults, changes, advance } = harness();
  for (let i = 0; i < 3; i++) faults.dispatchEnded('baseline', 'a:1', tlsFault);
  assert.equal(changes.length, 1);
  advance(20_000);
  faults.dispatchEnded('baseline', 'a:1', tlsFault);
  advance(10_000);
  assert.equal(changes.length, 1, '30 s after it became not ready, but 10 s after the last fault');
  advance(19_999);
  assert.equal(changes.length, 1);
  advance(1);
  assert.deepEqual(changes, [changes[0], undefined]);
  faults.close();
  for (let i = 0; i < 3; i++) faults.dispatchEnded('baseline', 'a:1', tlsFault);
  assert.equal(changes.length, 2, 'closed: readiness no longer changes');
});
