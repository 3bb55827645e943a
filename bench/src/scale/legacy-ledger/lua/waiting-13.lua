-- waiting: a balancer says it still has tasks queued for this cluster, or no longer has.
-- Entries expire on their own after waiterTtlMs (a balancer that died stops renewing them).
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 balancerId  3 action: 'keep' (queued tasks, none user-present),
--       'keep-user' (user-present ones among them), 'stop-user' (no user-present left), 'stop' (none left)
--       4 waiterTtlMs
-- Returns: 1
--@include set-worker
local balancer, action, expiry = ARGV[2], ARGV[3], now + tonumber(ARGV[4])
if action == 'keep' or action == 'keep-user' then
  redis.call('ZADD', KEYS[10], expiry, balancer)
  if action == 'keep-user' then redis.call('ZADD', KEYS[11], expiry, balancer) end
  return 1
end
local heldBackground = redis.call('ZREM', KEYS[11], balancer) == 1
if action == 'stop' then redis.call('ZREM', KEYS[10], balancer) end
-- Background tasks elsewhere may have waited for this user-present work: tell them.
if heldBackground and tonumber(redis.call('HGET', KEYS[9], 'free') or '0') > 0 and redis.call('ZCARD', KEYS[10]) > 0 then
  redis.call('PUBLISH', slotFreedChannel, '')
end
return 1
