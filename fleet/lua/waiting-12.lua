-- waiting: a balancer says it still has tasks queued for this cluster, or no longer has.
-- Entries expire on their own after waiterTtlMs (a balancer that died stops renewing them).
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 balancerId  3 action: 'keep' (queued tasks, none user-present),
--       'keep-user' (user-present ones among them), 'stop-user' (no user-present left), 'stop' (none left)
--       4 waiterTtlMs
-- Returns: 1
--@include ledger
local balancer, action = ARGV[2], ARGV[3]
if action == 'keep' or action == 'keep-user' then
  local expiry = clock() + tonumber(ARGV[4])
  redis.call('ZADD', waitingKey, expiry, balancer)
  if action == 'keep-user' then redis.call('ZADD', waitingUserKey, expiry, balancer) end
  return 1
end
local heldBackground = redis.call('ZREM', waitingUserKey, balancer) == 1
if action == 'stop' then redis.call('ZREM', waitingKey, balancer) end
-- Background tasks elsewhere may have waited for this user-present work: tell them.
if heldBackground and tonumber(redis.call('HGET', totalsKey, 'free') or '0') > 0 and redis.call('ZCARD', waitingKey) > 0 then
  redis.call('PUBLISH', slotFreedChannel, '')
end
return 1
