-- Shared by every ledger script (the loader pastes it in where "--@include set-worker" stands).
--
-- KEYS, the same thirteen in every script, all sharing one hash tag per cluster:
--   1 free         ZSET worker -> free slots (capacity - inflight); live workers that take tasks
--                  only (not draining, not marked unreachable): being in it is what "active" means
--   2 capacity     HASH worker -> max parallelism
--   3 inflight     HASH worker -> leases it holds (the count of its members in worker-leases)
--   4 address      HASH worker -> host:port of its gRPC server
--   5 heartbeat    ZSET worker -> time of its last heartbeat (ms)
--   6 draining     SET  workers that take no new tasks
--   7 leases       ZSET lease  -> expiry (ms)
--   8 lease-worker HASH lease  -> worker
--   9 totals       HASH capacity, free: sums over the workers in `free` (free counted as >= 0)
--  10 waiting      ZSET balancer -> expiry (ms): balancers with tasks queued for this cluster
--  11 waiting-user ZSET balancer -> expiry (ms): balancers with user-present tasks queued
--  12 worker-leases ZSET of "<worker>|<lease>", all scores 0: each worker's leases, by lex range
--  13 unreachable  ZSET worker -> until (ms): balancers could not connect to it; out of `free`
--                  until the mark is cleared (a health check passed) or, once it expired, the
--                  worker's next heartbeat (see unreachable-13.lua)
-- ARGV[1] in every script: the slot-freed pub/sub channel.

-- One clock for every process: Redis's. (Callers' clocks may disagree by seconds, and a
-- balancer ahead of the others would sweep live workers.)
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local slotFreedChannel = ARGV[1]

-- A worker's leases are the members of KEYS[12] between these bounds (worker ids have no '|').
local function leaseRange(worker)
  return '[' .. worker .. '|', '[' .. worker .. '|\255'
end

local function leaseCount(worker)
  local from, to = leaseRange(worker)
  return redis.call('ZLEXCOUNT', KEYS[12], from, to)
end

local function addLease(worker, lease, expiry)
  redis.call('HSET', KEYS[8], lease, worker)
  redis.call('ZADD', KEYS[7], expiry, lease)
  redis.call('ZADD', KEYS[12], 0, worker .. '|' .. lease)
end

-- Ends a lease; returns the worker that held it, or nil if there was no such lease.
local function removeLease(lease)
  local worker = redis.call('HGET', KEYS[8], lease)
  redis.call('HDEL', KEYS[8], lease)
  redis.call('ZREM', KEYS[7], lease)
  if worker then redis.call('ZREM', KEYS[12], worker .. '|' .. lease) end
  return worker
end

-- The one place that changes a worker's slots: it writes capacity and inflight, keeps the
-- free set and the cluster totals in step, and tells waiting balancers when slots freed.
-- capacity == nil removes the worker. active == false keeps it registered but out of `free`.
local function setWorker(worker, capacity, inflight, active)
  local oldScore = redis.call('ZSCORE', KEYS[1], worker)
  local oldCapacity, oldFree = 0, 0
  if oldScore then
    oldCapacity = tonumber(redis.call('HGET', KEYS[2], worker) or '0')
    oldFree = math.max(0, tonumber(oldScore))
  end
  local newCapacity, newFree = 0, 0
  if capacity == nil then
    -- The worker's leases go with it: a worker that comes back re-declares what it runs.
    local from, to = leaseRange(worker)
    for _, member in ipairs(redis.call('ZRANGEBYLEX', KEYS[12], from, to)) do
      local lease = string.sub(member, #worker + 2)
      redis.call('HDEL', KEYS[8], lease)
      redis.call('ZREM', KEYS[7], lease)
    end
    redis.call('ZREMRANGEBYLEX', KEYS[12], from, to)
    redis.call('ZREM', KEYS[1], worker)
    redis.call('HDEL', KEYS[2], worker)
    redis.call('HDEL', KEYS[3], worker)
    redis.call('HDEL', KEYS[4], worker)
    redis.call('ZREM', KEYS[5], worker)
    redis.call('SREM', KEYS[6], worker)
    redis.call('ZREM', KEYS[13], worker)
  else
    redis.call('HSET', KEYS[2], worker, capacity)
    redis.call('HSET', KEYS[3], worker, inflight)
    if active then
      redis.call('ZADD', KEYS[1], capacity - inflight, worker)
      newCapacity = capacity
      newFree = math.max(0, capacity - inflight)
    else
      redis.call('ZREM', KEYS[1], worker)
    end
  end
  if newCapacity ~= oldCapacity then redis.call('HINCRBY', KEYS[9], 'capacity', newCapacity - oldCapacity) end
  if newFree ~= oldFree then redis.call('HINCRBY', KEYS[9], 'free', newFree - oldFree) end
  if newFree > oldFree and redis.call('ZCARD', KEYS[10]) > 0 then
    redis.call('PUBLISH', slotFreedChannel, worker)
  end
end

-- A registered worker's capacity, and whether it takes tasks: setWorker keeps exactly the
-- active workers (not draining, not marked unreachable) in `free`.
local function workerState(worker)
  local capacity = redis.call('HGET', KEYS[2], worker)
  if not capacity then return nil end
  return tonumber(capacity), redis.call('ZSCORE', KEYS[1], worker) ~= false
end

-- After a lease of `worker` ended: its in-flight count is its leases, counted afresh.
local function leaseEnded(worker)
  if not worker then return end
  local capacity, active = workerState(worker)
  if capacity then setWorker(worker, capacity, leaseCount(worker), active) end
end
