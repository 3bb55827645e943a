-- heartbeat: registers the worker (again, after Redis lost its data), renews the leases of
-- the tasks it runs, and returns what operators ask of it.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 now  2 channel  3 workerId  4 address  5 capacity  6 draining (0|1)  7 leaseTtlMs
--       8.. lease ids of the tasks the worker is running
-- Returns: { maxParallelism setting or '', drain requested (0|1), inflight }
--@include set-worker
local worker, address, capacity = ARGV[3], ARGV[4], tonumber(ARGV[5])
local expiry = now + tonumber(ARGV[7])
local _, inflight = workerState(worker)
inflight = inflight or 0
for i = 8, #ARGV do
  local lease = ARGV[i]
  local owner = redis.call('HGET', KEYS[8], lease)
  if owner == worker then
    redis.call('ZADD', KEYS[7], 'XX', expiry, lease)
  elseif not owner then
    -- The lease expired or Redis lost it while the task still runs: count it again.
    redis.call('HSET', KEYS[8], lease, worker)
    redis.call('ZADD', KEYS[7], expiry, lease)
    inflight = inflight + 1
  end
end
redis.call('HSET', KEYS[4], worker, address)
redis.call('ZADD', KEYS[5], now, worker)
local drainRequested = redis.call('SISMEMBER', KEYS[6], worker)
if ARGV[6] == '1' then redis.call('SADD', KEYS[6], worker) end
local draining = ARGV[6] == '1' or drainRequested == 1
setWorker(worker, capacity, inflight, not draining)
return { redis.call('HGET', KEYS[12], 'maxParallelism') or '', drainRequested, inflight }
