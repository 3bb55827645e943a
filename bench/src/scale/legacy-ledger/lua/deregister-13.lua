-- deregister: the worker leaves the ledger (after it drained, or when an operator removes it).
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 workerId
-- Returns: 1 if the worker was registered, 0 if not
--@include set-worker
local worker = ARGV[2]
if not workerState(worker) then return 0 end
setWorker(worker, nil)
return 1
