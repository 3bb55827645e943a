/**
 * The cases of ../slow-upstream.test.ts again, on a Redis Cluster of 3 primaries with a replica each,
 * every stack on a cluster of its own (a Redis restart restarts every node, FLUSHALL flushes
 * every primary). One file per suite, so that the runner spreads them.
 */
process.env.HEADROOM_TEST_REDIS = 'cluster';
require('../slow-upstream.test');
