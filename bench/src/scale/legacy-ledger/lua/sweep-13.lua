-- sweep: removes workers whose heartbeat stopped, ends expired leases and forgets balancers
-- that stopped waiting. Any process may run it at any time; it is idempotent.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 heartbeatTimeoutMs  3 limit (most workers and leases handled per call)
-- Returns: { workers removed, leases expired }
--@include set-worker
local limit = tonumber(ARGV[3])
local dead = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[2]), 'LIMIT', 0, limit)
for _, worker in ipairs(dead) do setWorker(worker, nil) end
local expired = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now, 'LIMIT', 0, limit)
for _, lease in ipairs(expired) do leaseEnded(removeLease(lease)) end
redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[11], '-inf', now)
return { #dead, #expired }
