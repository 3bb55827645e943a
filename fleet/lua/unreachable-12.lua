-- unreachable: marks (ejects) a worker that balancers cannot connect to, or that fails far more
-- than its peers, so that no balancer reserves on it for a while (its slots leave the cluster
-- totals, as a draining worker's do); or clears the mark when it is back. The mark's reason
-- ('unreachable' or 'failing') is kept for operators; the latest mark's reason wins. A mark
-- nobody clears ends at the worker's first heartbeat after it expired. Of two marks the later
-- end wins. At most max(1, floor(share x workers))
-- workers of the cluster are marked at once: a balancer whose own network failed must not
-- empty the cluster for every balancer.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 workerId  3 forMs (0: clear the mark)  4 most workers marked at once, as a
--       share of the cluster's workers (0..1)  5 marking: the reason ('unreachable' when not
--       given); clearing: '' or the end (ms) of the mark the caller made: a mark that ends later
--       was renewed by another balancer, and is kept for it to end
-- Returns: { 'marked', until (ms) } | { 'cleared' } | { 'kept', until (ms) } | { 'not-registered' } | { 'too-many', marked, workers }
--@include ledger
local worker, forMs, maxShare = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now, nowUs = clock()
local state = workerState(worker)
if not state then return { 'not-registered' } end
if forMs == 0 then
  local markedUntil = redis.call('ZSCORE', unreachableKey, worker)
  if markedUntil and ARGV[5] and ARGV[5] ~= '' and tonumber(markedUntil) > tonumber(ARGV[5]) then return { 'kept', tonumber(markedUntil) } end
  redis.call('ZREM', unreachableKey, worker)
  redis.call('HDEL', ejectionReasonKey, worker)
  setWorker(worker, state.capacity, state.inflight, redis.call('SISMEMBER', drainingKey, worker) == 0, nowUs, state)
  return { 'cleared' }
end
if not redis.call('ZSCORE', unreachableKey, worker) then
  -- Marks that expired but were not yet ended by a heartbeat count too (briefly).
  local marked, workers = redis.call('ZCARD', unreachableKey), redis.call('ZCARD', heartbeatKey)
  if marked + 1 > math.max(1, math.floor(maxShare * workers)) then return { 'too-many', marked, workers } end
end
redis.call('ZADD', unreachableKey, 'GT', now + forMs, worker)
redis.call('HSET', ejectionReasonKey, worker, ARGV[5] or 'unreachable')
setWorker(worker, state.capacity, state.inflight, false, nowUs, state)
return { 'marked', tonumber(redis.call('ZSCORE', unreachableKey, worker)) }
