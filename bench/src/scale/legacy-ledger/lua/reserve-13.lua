-- reserve: takes one slot on the live worker with the most free slots (ties spread at random),
-- or on one named worker, and records a lease for it. Draining workers and workers marked
-- unreachable are not in `free`, so they are never chosen and cost this script nothing.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 priority ('user'|'background')  3 share of capacity kept for user-present (0..1)
--       4 leaseId  5 leaseTtlMs  6 a random whole number (Lua's own random is not random in scripts)
--       7 balancerId  8 waiterTtlMs  9 wait (1: on failure, register the balancer as waiting)
--       10 target worker ('' = least-loaded)  11.. workers to skip
-- Returns: { 'ok', worker, address, free slots it had } or { 'none', reason }
--   reasons: 'no-workers', 'full', 'kept-for-user-present', 'user-present-waiting', 'target-full'
--@include set-worker
local priority, keptShare, lease = ARGV[2], tonumber(ARGV[3]), ARGV[4]
local leaseTtlMs, random, balancer = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local waiterTtlMs, wait, target = tonumber(ARGV[8]), ARGV[9] == '1', ARGV[10]

local function none(reason)
  if wait then
    redis.call('ZADD', KEYS[10], now + waiterTtlMs, balancer)
    if priority == 'user' then redis.call('ZADD', KEYS[11], now + waiterTtlMs, balancer) end
  end
  return { 'none', reason }
end

if priority ~= 'user' then
  -- Priority holds across balancers: no background task starts while a user-present one waits.
  redis.call('ZREMRANGEBYSCORE', KEYS[11], '-inf', now)
  if redis.call('ZCARD', KEYS[11]) > 0 then return none('user-present-waiting') end
  local totalCapacity = tonumber(redis.call('HGET', KEYS[9], 'capacity') or '0')
  local totalFree = tonumber(redis.call('HGET', KEYS[9], 'free') or '0')
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
  free = tonumber(redis.call('ZSCORE', KEYS[1], target) or '0')
  if free < 1 then return none('target-full') end
  worker = target
else
  local top = redis.call('ZREVRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if #top == 0 then return none('no-workers') end
  free = tonumber(top[2])
  if free < 1 then return none('full') end
  if #ARGV < 11 then
    -- Ties spread: pick at random among all workers with the most free slots.
    local tied = redis.call('ZCOUNT', KEYS[1], free, free)
    worker = redis.call('ZRANGEBYSCORE', KEYS[1], free, free, 'LIMIT', random % tied, 1)[1]
  else
    local skip = {}
    for i = 11, #ARGV do skip[ARGV[i]] = true end
    local candidates = redis.call('ZREVRANGE', KEYS[1], 0, #ARGV - 10, 'WITHSCORES')
    for i = 1, #candidates, 2 do
      if not skip[candidates[i]] and tonumber(candidates[i + 1]) >= 1 then
        worker, free = candidates[i], tonumber(candidates[i + 1])
        break
      end
    end
    if not worker then return none('full') end
  end
end

addLease(worker, lease, now + leaseTtlMs)
setWorker(worker, workerState(worker), leaseCount(worker), true)
return { 'ok', worker, redis.call('HGET', KEYS[4], worker), free }
