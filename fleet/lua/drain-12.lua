-- drain: the worker takes no new tasks (its running ones finish); it learns so at its next
-- heartbeat. Draining a worker twice changes nothing.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 now  2 channel  3 workerId
-- Returns: 1 if the worker is registered, 0 if not
--@include set-worker
local worker = ARGV[3]
local capacity, inflight = workerState(worker)
if not capacity then return 0 end
redis.call('SADD', KEYS[6], worker)
setWorker(worker, capacity, inflight, false)
return 1
