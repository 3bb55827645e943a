/**
 * The fault suite again, on a Redis Cluster of 3 primaries with a replica each: the cases of
 * process-faults, proxyless-faults and shared-state-faults whose recovery goes through Redis (a
 * killed process's slots, heartbeats that lapse, a Redis restart of every node, FLUSHALL of every
 * primary), each stack on a cluster of its own. Cases that Redis takes no part in (a worker's
 * drain, an Unleash outage, a slow upstream's local queue) run on a single Redis only. One file,
 * so that no two Redis Clusters of six nodes run at once beside the rest of the suite.
 */
process.env.HEADROOM_TEST_REDIS = 'cluster';
require('./process-faults.test');
require('./proxyless-faults.test');
require('./shared-state-faults.test');
