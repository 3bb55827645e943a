-- heartbeat: registers the worker (again, after Redis lost its data or a sweep removed it),
-- settles its leases against the ones it holds, and says whether an operator asked it to drain
-- and whether balancers marked it unreachable. An expired unreachable mark ends here.
--
-- The count: a worker's leases are its records in leasesPrefix .. worker (lease -> time
-- reserved), and its in-flight count is their number. A record is right while its task is on
-- its way to the worker, held there (queued or running), or answered with its release on the
-- way back. The worker says which leases it holds; so a record it does not hold that was
-- reserved at least dispatchGraceMs ago was answered (its release is late or lost), refused, or
-- never sent (a balancer died): nobody will release it, and it is dropped here. A lease the
-- worker holds that has no record (Redis lost it, or it was dropped while slow on its way) is
-- written back, dated 0 so that the first heartbeat after the worker lets it go drops it if no
-- release does. Nothing here is a count matched against another count, so no error survives
-- past the next heartbeat: a slot lost for any reason is back at the worker's first heartbeat
-- that runs dispatchGraceMs after its reservation and after the worker stopped holding it.
-- Its cost grows with the worker's leases (at most its max parallelism, plus what is on its way),
-- not with the tasks it ran: one read of the worker's records, writes only for what changed.
-- The number of leases the worker holds is kept as "<worker>|held" in `workers`, so that
-- operators can compare the ledger's count with what the worker runs (ledger drift) between
-- heartbeats: written only when it changed.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 workerId  3 address  4 capacity  5 draining (0|1)
--       6 dispatchGraceMs: a record the worker does not hold is kept this long after its reservation
--       7 '1' when this process's previous heartbeat succeeded with the same address (the
--         address is then not read to compare; a registration that was lost writes it anyway)
--       8.. the leases the worker holds (the part of each lease id after "<worker>|", which names
--         the lease's integration: a record written back counts for it, and one dropped stops counting)
-- Returns: { drain requested (0|1), in flight, marked unreachable (0|1), workers in the cluster
--   (the worker's period scales with it above a size: Ledger.heartbeatScale), records dropped,
--   records written back }
--@include ledger
local worker, address, capacity = ARGV[2], ARGV[3], tonumber(ARGV[4])
local dispatchGraceMs = tonumber(ARGV[6])
local now, nowUs = clock()
local leasesKey = leasesPrefix .. worker

-- Its capacity and the held count of its last heartbeat, in one read.
local heldField = worker .. '|held'
local stored = redis.call('HMGET', workersKey, worker, heldField)
local state = stored[1] and workerState(worker, stored[1]) or nil
local held = {}
for i = 8, #ARGV do held[ARGV[i]] = true end
local heldCount = #ARGV - 7
local records = redis.call('HGETALL', leasesKey)
local count, stale = 0, {}
local reservedBefore = now - dispatchGraceMs
for i = 1, #records, 2 do
  local lease = records[i]
  if held[lease] then
    held[lease] = false
    count = count + 1
  elseif tonumber(records[i + 1]) > reservedBefore then
    count = count + 1
  else
    stale[#stale + 1] = lease
  end
end
-- In chunks: unpack() has a limit on how many values it passes.
for _, lease in ipairs(stale) do countLease(lease, -1) end
for from = 1, #stale, 1000 do
  redis.call('HDEL', leasesKey, unpack(stale, from, math.min(#stale, from + 999)))
end
local restored = 0
for lease, missing in pairs(held) do
  if missing then
    redis.call('HSET', leasesKey, lease, '0')
    countLease(lease, 1)
    restored = restored + 1
  end
end
count = count + restored

if not state or ARGV[7] ~= '1' and redis.call('HGET', addressKey, worker) ~= address then
  redis.call('HSET', addressKey, worker, address)
  directoryChanged(nowUs)
end
redis.call('ZADD', heartbeatKey, now, worker)
if tonumber(stored[2]) ~= heldCount then redis.call('HSET', workersKey, heldField, heldCount) end
-- A worker in `free` has neither a drain request nor an unreachable mark: nothing to read.
local drainRequested, unreachable = 0, false
if not (state and state.score) or ARGV[5] == '1' then
  drainRequested = redis.call('SISMEMBER', drainingKey, worker)
  if ARGV[5] == '1' and drainRequested == 0 then redis.call('SADD', drainingKey, worker) end
  local unreachableUntil = redis.call('ZSCORE', unreachableKey, worker)
  unreachable = unreachableUntil and tonumber(unreachableUntil) > now
  if unreachableUntil and not unreachable then redis.call('ZREM', unreachableKey, worker) end
end
local draining = ARGV[5] == '1' or drainRequested == 1
setWorker(worker, capacity, count, not draining and not unreachable, nowUs, state)
return { drainRequested, count, unreachable and 1 or 0, redis.call('ZCARD', heartbeatKey), #stale, restored }
