-- sweep: removes workers whose heartbeat stopped, ends expired leases and forgets balancers
-- that stopped waiting. Any process may run it at any time; it is idempotent.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 now  2 channel  3 heartbeatTimeoutMs  4 limit (most workers and leases handled per call)
-- Returns: { workers removed, leases expired }
--@include set-worker
local limit = tonumber(ARGV[4])
local dead = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now - tonumber(ARGV[3]), 'LIMIT', 0, limit)
for _, worker in ipairs(dead) do setWorker(worker, nil) end
local expired = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now, 'LIMIT', 0, limit)
for _, lease in ipairs(expired) do
  local worker = redis.call('HGET', KEYS[8], lease)
  redis.call('HDEL', KEYS[8], lease)
  redis.call('ZREM', KEYS[7], lease)
  if worker then
    local capacity, inflight, active = workerState(worker)
    if capacity then setWorker(worker, capacity, math.max(0, inflight - 1), active) end
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[10], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[11], '-inf', now)
return { #dead, #expired }
