-- release: ends a lease and gives its slot back. Releasing a lease twice, or one that
-- expired or whose worker left, changes nothing.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 now  2 channel  3 leaseId
-- Returns: 1 if a lease was released, 0 if there was none
--@include set-worker
local lease = ARGV[3]
local worker = redis.call('HGET', KEYS[8], lease)
if not worker then return 0 end
redis.call('HDEL', KEYS[8], lease)
redis.call('ZREM', KEYS[7], lease)
local capacity, inflight, active = workerState(worker)
if capacity then setWorker(worker, capacity, math.max(0, inflight - 1), active) end
return 1
