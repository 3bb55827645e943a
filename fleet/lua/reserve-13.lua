-- reserve: takes one slot on the live worker with the most free slots (of those tied, the one
-- that waited longest), or on one named worker, and records a lease for it. Draining workers and workers marked unreachable are not in `free`: they cost nothing.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 priority ('user'|'background')  3 share of capacity kept for user-present (0..1)
--       4 lease nonce (unique)  5 balancerId  6 waiterTtlMs  7 wait (1: on failure, register the
--       balancer as waiting)  8 target worker ('' = least-loaded)  9.. workers to skip
-- Returns: { 'ok', worker, address, free slots it had, lease id } or { 'none', reason }
--   reasons: 'no-workers', 'full', 'kept-for-user-present', 'user-present-waiting', 'target-full'
--   The lease id is "<worker>|<nonce>": release finds the worker's leases from it.
--@include ledger
local priority, keptShare, nonce = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local balancer, waiterTtlMs = ARGV[5], tonumber(ARGV[6])
local wait, target = ARGV[7] == '1', ARGV[8]
local now, nowUs = clock()

local function none(reason)
  if wait then
    redis.call('ZADD', waitingKey, now + waiterTtlMs, balancer)
    if priority == 'user' then redis.call('ZADD', waitingUserKey, now + waiterTtlMs, balancer) end
  end
  return { 'none', reason }
end

if priority ~= 'user' then
  -- Priority holds across balancers: no background task starts while a user-present one waits
  -- (entries past their expiry do not count; the sweep removes them).
  if redis.call('ZCOUNT', waitingUserKey, '(' .. now, '+inf') > 0 then return none('user-present-waiting') end
  local totals = redis.call('HMGET', totalsKey, 'capacity', 'free')
  local totalCapacity, totalFree = tonumber(totals[1] or '0'), tonumber(totals[2] or '0')
  -- Keep ceil(share x capacity) slots, but never all of them: a one-slot cluster still runs background work.
  local kept = math.min(math.ceil(keptShare * totalCapacity), math.max(0, totalCapacity - 1))
  if totalFree - 1 < kept then
    if totalCapacity == 0 then return none('no-workers') end
    if totalFree == 0 then return none('full') end
    return none('kept-for-user-present')
  end
end

local worker, free
if target ~= '' then
  free = freeOf(redis.call('ZSCORE', freeKey, target) or '0')
  if free < 1 then return none('target-full') end
  worker = target
elseif #ARGV < 9 then
  local top = redis.call('ZREVRANGE', freeKey, 0, 0, 'WITHSCORES')
  if #top == 0 then return none('no-workers') end
  worker, free = top[1], freeOf(top[2])
  if free < 1 then return none('full') end
else
  local skip = {}
  for i = 9, #ARGV do skip[ARGV[i]] = true end
  local candidates = redis.call('ZREVRANGE', freeKey, 0, #ARGV - 8, 'WITHSCORES')
  if #candidates == 0 then return none('no-workers') end
  for i = 1, #candidates, 2 do
    if not skip[candidates[i]] and freeOf(candidates[i + 1]) >= 1 then
      worker, free = candidates[i], freeOf(candidates[i + 1])
      break
    end
  end
  if not worker then return none('full') end
end

-- The hot path: only what changes is written (free >= 1, so the totals lose exactly one).
redis.call('HINCRBY', inflightKey, worker, 1)
redis.call('ZADD', freeKey, freeScore(free - 1, nowUs), worker)
redis.call('HINCRBY', totalsKey, 'free', -1)
redis.call('HINCRBY', reservedKey, worker, 1)
redis.call('HSET', leasesPrefix .. worker, nonce, now)
return { 'ok', worker, redis.call('HGET', addressKey, worker), free, worker .. '|' .. nonce }
