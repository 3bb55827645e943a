import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { formatLeaseId, leaseNonceOf } from '../src/index';

test("a lease id gives its nonce back to its own worker only, with an integration's suffix kept", () => {
  assert.equal(formatLeaseId('w1', 'n7'), 'w1|n7');
  assert.equal(leaseNonceOf(formatLeaseId('w1', 'n7'), 'w1'), 'n7');
  assert.equal(leaseNonceOf('w1|n7|bank-a', 'w1'), 'n7|bank-a');
  assert.equal(leaseNonceOf('w1|n7', 'w'), undefined, 'a worker whose id is a prefix of the owner is not the owner');
  assert.equal(leaseNonceOf('w10|n7', 'w1'), undefined);
  assert.equal(leaseNonceOf('l1', 'w1'), undefined, 'not given out by the ledger');
});
