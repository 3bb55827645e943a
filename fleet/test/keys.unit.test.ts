/**
 * The key names themselves: deployments (ACL rules, dashboards, running fleets) and the Lua
 * scripts depend on them, so a change here must be deliberate. No Redis needed.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { controlKeys, keyspacePattern, latencyKeys, reportKeys } from '../src/index';

test('control keys share the hash tag {<prefix>:control}', () => {
  const keys = controlKeys('hr');
  assert.deepEqual(
    { ...keys, profile: keys.profile('p-1'), autoLimitHistory: keys.autoLimitHistory('baseline', 'bank-a') },
    {
      hashTag: '{hr:control}',
      override: '{hr:control}:override',
      balancers: '{hr:control}:balancers',
      balancerInfo: '{hr:control}:balancer-info',
      acks: '{hr:control}:override-acks',
      overrideChangedChannel: '{hr:control}:override-changed',
      overrideAckedChannel: '{hr:control}:override-acked',
      auditAppendedChannel: '{hr:control}:audit-appended',
      lastRollback: '{hr:control}:last-rollback',
      overrideChangeRecordsChannel: '{hr:control}:override-changes',
      profileLock: '{hr:control}:profile-lock',
      profiles: '{hr:control}:profiles',
      profile: '{hr:control}:profile:p-1',
      rollout: '{hr:control}:rollout',
      rolloutHistory: '{hr:control}:rollout-history',
      autopilotLease: '{hr:control}:autopilot-lease',
      autopilotFence: '{hr:control}:autopilot-fence',
      autoLimits: '{hr:control}:auto-limits',
      autoLimitHistory: '{hr:control}:auto-limit-history:baseline|bank-a',
      autoLimitLease: '{hr:control}:auto-limit-lease',
    },
  );
});

test('report and latency keys, and the pattern that matches every key of a prefix', () => {
  assert.equal(reportKeys('hr').hashTag, '{hr:reports}');
  assert.equal(reportKeys('hr').worker('w-1'), '{hr:reports}:worker:w-1');
  assert.equal(latencyKeys('hr').hashTag, '{hr:latency}');
  assert.equal(latencyKeys('hr').slot(1_700_000_000_000), '{hr:latency}:1700000000000');
  assert.equal(latencyKeys('hr').balancerErrorSlot(1_700_000_000_000), '{hr:latency}:balancer-errors:1700000000000');
  assert.equal(keyspacePattern('hr'), '{hr:*');
});
