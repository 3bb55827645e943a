/**
 * The fault suite again, on a Redis Cluster of 3 primaries with a replica each: every case of
 * process-faults, proxyless-faults, shared-state-faults and slow-upstream, its stack on a cluster
 * of its own (a Redis restart restarts every node, FLUSHALL flushes every primary). One file, so
 * that no two Redis Clusters of six nodes run at once beside the rest of the suite.
 */
process.env.HEADROOM_TEST_REDIS = 'cluster';
require('./process-faults.test');
require('./proxyless-faults.test');
require('./shared-state-faults.test');
require('./slow-upstream.test');
