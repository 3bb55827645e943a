-- sweep: removes workers whose heartbeat stopped (with their leases) and forgets balancers that
-- stopped waiting. Any process may run it at any time; it is idempotent. Leases need no sweep:
-- each heartbeat settles its worker's count.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 heartbeatTimeoutMs  3 limit (most workers removed per call)
-- Returns: { workers removed }
--@include ledger
local now, nowUs = clock()
local dead = redis.call('ZRANGEBYSCORE', heartbeatKey, '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, tonumber(ARGV[3]))
for _, worker in ipairs(dead) do setWorker(worker, nil) end
if #dead > 0 then directoryChanged(nowUs) end
redis.call('ZREMRANGEBYSCORE', waitingKey, '-inf', now)
redis.call('ZREMRANGEBYSCORE', waitingUserKey, '-inf', now)
return { #dead }
