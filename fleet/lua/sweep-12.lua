-- sweep: removes workers whose heartbeat stopped (with their leases) and forgets balancers that
-- stopped waiting. Any process may run it at any time; it is idempotent. Leases need no sweep:
-- each heartbeat settles its worker's count.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 heartbeatTimeoutMs  3 limit (most workers removed per call)
--       4 workersAtFullHeartbeatRate: above this many workers, heartbeat periods and this
--         timeout grow in proportion (Ledger.heartbeatScale; a worker is told its scale by its
--         heartbeat). A fleet that shrank by more than 3x within one period may have workers
--         swept before their next heartbeat, which registers them again with what they run.
-- Returns: { workers removed }
--@include ledger
local now, nowUs = clock()
local scale = math.max(1, redis.call('ZCARD', heartbeatKey) / tonumber(ARGV[4]))
local dead = redis.call('ZRANGEBYSCORE', heartbeatKey, '-inf', now - tonumber(ARGV[2]) * scale, 'LIMIT', 0, tonumber(ARGV[3]))
for _, worker in ipairs(dead) do setWorker(worker, nil) end
if #dead > 0 then workersLeft(nowUs) end
redis.call('ZREMRANGEBYSCORE', waitingKey, '-inf', now)
redis.call('ZREMRANGEBYSCORE', waitingUserKey, '-inf', now)
return { #dead }
