import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { BoundedLabelValues } from '../src/index';

test('label values past the bound share "other"; those seen first keep their own', () => {
  const labels = new BoundedLabelValues(2);
  assert.deepEqual(
    ['bank-a', 'bank-b', 'bank-c', 'bank-a', 'bank-d', 'bank-b'].map((value) => labels.of(value)),
    ['bank-a', 'bank-b', 'other', 'bank-a', 'other', 'bank-b'],
  );
  assert.equal(new BoundedLabelValues(0, 'rest').of('bank-a'), 'rest');
});
