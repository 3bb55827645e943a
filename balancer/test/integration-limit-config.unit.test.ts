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

test('the default integration limit may carry a start rate, checked naming the field', () => {
  const parse = (defaultIntegrationLimit: unknown) =>
    parseConfig('balancer options', balancerOptionsSchema, { defaultIntegrationLimit }).defaultIntegrationLimit;
  assert.deepEqual(parse({ shareOfCapacity: 0.5, minInFlight: 8, maxStartsPerSecond: 1000 }), {
    shareOfCapacity: 0.5,
    minInFlight: 8,
    maxStartsPerSecond: 1000,
  });
  assert.deepEqual(parse({ off: true, maxStartsPerSecond: 0.5 }), { off: true, maxStartsPerSecond: 0.5 });
  for (const bad of [-1, 0, 1e7, 0.0001]) {
    assert.throws(
      () => parse({ shareOfCapacity: 0.5, minInFlight: 8, maxStartsPerSecond: bad }),
      /defaultIntegrationLimit\.maxStartsPerSecond: got .*, expected maxStartsPerSecond to be a number of task starts per second from 0\.001 to 1000000/,
      String(bad),
    );
  }
  for (const bad of ['1000', null, { maxStartsPerSecond: 5 }]) {
    assert.throws(
      () => parse(typeof bad === 'object' && bad !== null ? bad : { off: true, maxStartsPerSecond: bad }),
      /defaultIntegrationLimit/,
      JSON.stringify(bad),
    );
  }
});
