-- drain: the worker takes no new tasks (its running ones finish); it learns so at its next
-- heartbeat. Draining a worker twice changes nothing.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 workerId
-- Returns: 1 if the worker is registered, 0 if not
--@include ledger
local worker = ARGV[2]
local state = workerState(worker)
if not state then return 0 end
redis.call('SADD', drainingKey, worker)
setWorker(worker, state.capacity, state.inflight, false, nil, state)
return 1
