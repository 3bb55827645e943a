-- heartbeat: registers the worker (again, after Redis lost its data or a sweep removed it),
-- renews the leases of the tasks it runs, recounts its in-flight tasks, and says whether an
-- operator asked it to drain and whether balancers marked it unreachable. An expired
-- unreachable mark ends here: the worker takes tasks again.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 workerId  3 address  4 capacity  5 draining (0|1)  6 leaseTtlMs
--       7.. lease ids of the tasks the worker is running
-- Returns: { drain requested (0|1), inflight, marked unreachable (0|1) }
--@include set-worker
local worker, address, capacity = ARGV[2], ARGV[3], tonumber(ARGV[4])
local expiry = now + tonumber(ARGV[6])
for i = 7, #ARGV do
  local lease = ARGV[i]
  local owner = redis.call('HGET', KEYS[8], lease)
  if owner == worker then
    redis.call('ZADD', KEYS[7], 'XX', expiry, lease)
  elseif not owner then
    -- The lease expired, or Redis lost it, or this worker was swept, while the task still runs.
    addLease(worker, lease, expiry)
  end
end
-- Authoritative: in flight = the tasks it runs plus leases reserved for it and not yet arrived.
local inflight = leaseCount(worker)
redis.call('HSET', KEYS[4], worker, address)
redis.call('ZADD', KEYS[5], now, worker)
local drainRequested = redis.call('SISMEMBER', KEYS[6], worker)
if ARGV[5] == '1' then redis.call('SADD', KEYS[6], worker) end
local draining = ARGV[5] == '1' or drainRequested == 1
local unreachableUntil = redis.call('ZSCORE', KEYS[13], worker)
local unreachable = unreachableUntil and tonumber(unreachableUntil) > now
if unreachableUntil and not unreachable then redis.call('ZREM', KEYS[13], worker) end
setWorker(worker, capacity, inflight, not draining and not unreachable)
return { drainRequested, inflight, unreachable and 1 or 0 }
