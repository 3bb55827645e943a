-- release: ends a lease and gives its slot back. Releasing a lease twice, or one that
-- expired or whose worker left, changes nothing.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 leaseId
-- Returns: 1 if a lease was released, 0 if there was none
--@include set-worker
local worker = removeLease(ARGV[2])
if not worker then return 0 end
leaseEnded(worker)
return 1
