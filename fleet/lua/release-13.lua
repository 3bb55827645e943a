-- release: ends a lease and gives its slot back. Releasing a lease twice, or one whose worker
-- left (or whose record a heartbeat dropped), changes nothing: the worker's next heartbeat
-- settles its count either way.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 lease id ("<worker>|<nonce>", as reserve returned it)
-- Returns: 1 if a lease was released, 0 if there was none
--@include ledger
local lease = ARGV[2]
local bar = string.find(lease, '|', 1, true)
if not bar then return 0 end
local worker, nonce = string.sub(lease, 1, bar - 1), string.sub(lease, bar + 1)
if redis.call('HDEL', leasesPrefix .. worker, nonce) == 0 then return 0 end
if redis.call('HINCRBY', inflightKey, worker, -1) < 0 then
  -- A heartbeat already dropped this lease from the count (it took longer than two periods to
  -- arrive, or the worker said it no longer held it): its slot is free already.
  redis.call('HSET', inflightKey, worker, 0)
  return 1
end
-- Only an active worker is in `free` (XX): the slot returns keeping its place in the turn.
local score = redis.call('ZADD', freeKey, 'XX', 'INCR', 1, worker)
if score and freeOf(score) >= 1 then
  redis.call('HINCRBY', totalsKey, 'free', 1)
  if redis.call('ZCARD', waitingKey) > 0 then redis.call('PUBLISH', slotFreedChannel, worker) end
end
return 1
