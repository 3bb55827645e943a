import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { parseConfig } from '@headroom/common';
import { balancerOptionsSchema } from '../src/config';

test('the default integration limit and the queue share at the limit are validated, naming the field', () => {
  const config = parseConfig('balancer options', balancerOptionsSchema, {
    defaultIntegrationLimit: { shareOfCapacity: 0.25, minInFlight: 4 },
    maxQueuedShareAtLimit: 0.2,
  });
  assert.deepEqual(config.defaultIntegrationLimit, { shareOfCapacity: 0.25, minInFlight: 4 });
  assert.equal(parseConfig('balancer options', balancerOptionsSchema, {}).maxQueuedShareAtLimit, 0.5);
  assert.deepEqual(parseConfig('balancer options', balancerOptionsSchema, { defaultIntegrationLimit: { off: true } }).defaultIntegrationLimit, { off: true });
  for (const bad of [
    { shareOfCapacity: 1.5, minInFlight: 4 },
    { shareOfCapacity: 0.5, minInFlight: -1 },
    { shareOfCapacity: 0.5, minInFlight: 4, burst: 2 },
    { off: false },
    'half',
  ]) {
    assert.throws(
      () => parseConfig('balancer options', balancerOptionsSchema, { defaultIntegrationLimit: bad }),
      /defaultIntegrationLimit/,
      JSON.stringify(bad),
    );
  }
  assert.throws(() => parseConfig('balancer options', balancerOptionsSchema, { maxQueuedShareAtLimit: 0 }), /maxQueuedShareAtLimit: .*above 0/);
});
