-- waiting: a balancer says it still has tasks queued for this cluster, or no longer has.
-- Entries expire on their own after waiterTtlMs (a balancer that died stops renewing them).
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 balancerId  3 action: 'keep' (queued tasks, none user-present),
--       'keep-user' (user-present ones among them), 'stop-user' (no user-present left), 'stop' (none left)
--       4 waiterTtlMs
-- Returns: 1
--@include ledger
local balancer, action = ARGV[2], ARGV[3]
local now = clock()
if action == 'keep' or action == 'keep-user' then
  local expiry = now + tonumber(ARGV[4])
  redis.call('ZADD', waitingKey, expiry, balancer)
  if action == 'keep-user' then redis.call('ZADD', waitingUserKey, expiry, balancer) end
  -- The totals keep the latest expiry of each set (see includes/ledger.lua).
  local latest = redis.call('HMGET', totalsKey, 'waiting-until', 'user-waiting-until')
  if expiry > tonumber(latest[1] or '0') then redis.call('HSET', totalsKey, 'waiting-until', expiry) end
  if action == 'keep-user' and expiry > tonumber(latest[2] or '0') then redis.call('HSET', totalsKey, 'user-waiting-until', expiry) end
  return 1
end

-- The latest expiry left in `set` becomes the totals' `field` (0 when none is left).
local function latestExpiryTo(set, field)
  local last = redis.call('ZREVRANGE', set, 0, 0, 'WITHSCORES')
  redis.call('HSET', totalsKey, field, last[2] or 0)
end

local heldBackground = redis.call('ZREM', waitingUserKey, balancer) == 1
if heldBackground then latestExpiryTo(waitingUserKey, 'user-waiting-until') end
if action == 'stop' and redis.call('ZREM', waitingKey, balancer) == 1 then latestExpiryTo(waitingKey, 'waiting-until') end
-- Background tasks elsewhere may have waited for this user-present work: tell them.
if heldBackground and tonumber(redis.call('HGET', totalsKey, 'free') or '0') > 0 and someoneWaits(now) then
  redis.call('PUBLISH', slotFreedChannel, '')
end
return 1
