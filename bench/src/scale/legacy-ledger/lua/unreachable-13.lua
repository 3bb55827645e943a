-- unreachable: marks a worker that balancers cannot connect to, so that no balancer reserves on
-- it for a while (its slots leave the cluster totals, as a draining worker's do); or clears the
-- mark when a health check passed. A mark nobody clears ends at the worker's first heartbeat
-- after it expired. Of two marks the later end wins. At most max(1, floor(share x workers))
-- workers of the cluster are marked at once: a balancer whose own network failed must not
-- empty the cluster for every balancer.
-- KEYS: see includes/set-worker.lua
-- ARGV: 1 channel  2 workerId  3 forMs (0: clear the mark)  4 most workers marked at once, as a
--       share of the cluster's workers (0..1)
-- Returns: { 'marked', until (ms) } | { 'cleared' } | { 'not-registered' } | { 'too-many', marked, workers }
--@include set-worker
local worker, forMs, maxShare = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local capacity = workerState(worker)
if not capacity then return { 'not-registered' } end
if forMs == 0 then
  redis.call('ZREM', KEYS[13], worker)
  setWorker(worker, capacity, leaseCount(worker), redis.call('SISMEMBER', KEYS[6], worker) == 0)
  return { 'cleared' }
end
if not redis.call('ZSCORE', KEYS[13], worker) then
  -- Marks that expired but were not yet ended by a heartbeat count too (briefly).
  local marked, workers = redis.call('ZCARD', KEYS[13]), redis.call('HLEN', KEYS[2])
  if marked + 1 > math.max(1, math.floor(maxShare * workers)) then return { 'too-many', marked, workers } end
end
redis.call('ZADD', KEYS[13], 'GT', now + forMs, worker)
setWorker(worker, capacity, leaseCount(worker), false)
return { 'marked', tonumber(redis.call('ZSCORE', KEYS[13], worker)) }
