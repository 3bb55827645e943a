-- drain: the worker takes no new tasks (its running ones finish); it learns so at its next
-- heartbeat. Draining a worker twice changes nothing.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 workerId
-- Returns: 1 if the worker is registered, 0 if not
--@include set-worker
local worker = ARGV[2]
local capacity = workerState(worker)
if not capacity then return 0 end
redis.call('SADD', KEYS[6], worker)
setWorker(worker, capacity, leaseCount(worker), false)
return 1
