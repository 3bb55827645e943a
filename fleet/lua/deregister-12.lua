-- deregister: the worker leaves the ledger (after it drained, or when an operator removes it).
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 workerId
-- Returns: 1 if the worker was registered, 0 if not
--@include ledger
local worker = ARGV[2]
local state = workerState(worker)
if not state then return 0 end
setWorker(worker, nil, nil, false, nil, state)
local _, nowUs = clock()
workersLeft(nowUs)
return 1
