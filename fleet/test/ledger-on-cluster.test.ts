/**
 * Every ledger property of ledger.test.ts, proved again on a Redis Cluster of 3 primaries with a
 * replica each: the scripts' keys share one hash tag, so each runs on one shard, and
 * pub/sub reaches a subscriber connected to another node.
 */
process.env.HEADROOM_TEST_REDIS = 'cluster';
require('./ledger.test');
