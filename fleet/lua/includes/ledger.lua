-- Shared by every ledger script (the loader pastes it in where "--@include ledger" stands).
--
-- KEYS, the same in every script, all sharing one hash tag per cluster, bound to names here:
local freeKey = KEYS[1]          -- ZSET worker -> free slots (capacity - in flight) x 2^30 + a tie-break turn in [0, 2^30);
                                 --      the workers that take tasks (not draining, not marked unreachable): being in it
                                 --      is what "active" means, so a worker in it has no drain request and no
                                 --      unreachable mark (the heartbeat reads neither for it)
local workersKey = KEYS[2]       -- HASH worker -> max parallelism: every registered worker is in it; and
                                 --      "<worker>|held" -> the leases it held at its last heartbeat (what it runs)
local inflightKey = KEYS[3]      -- HASH worker -> its leases (reserved and not yet released), for a worker out of
                                 --      `free` only: one in `free` has capacity - its free slots (so a lease
                                 --      costs no write here)
local addressKey = KEYS[4]       -- HASH worker -> host:port of its gRPC server
local heartbeatKey = KEYS[5]     -- ZSET worker -> time of its last heartbeat (ms): every registered worker is in it
local drainingKey = KEYS[6]      -- SET  workers that take no new tasks
local totalsKey = KEYS[7]        -- HASH capacity, free: sums over the workers in `free` (free counted as >= 0); and
                                 --      per integration, 'i:<integration>' (names hold no ':', so it cannot meet them):
                                 --      what the ledger holds of it, "<count>" or "<count>|<wait until>|<limit>", where
                                 --        count: its lease records in the cluster, kept exact by every write of a lease
                                 --          record (settle, countLease)
                                 --        wait until: until when (ms, 0: none) a user-present task waits at its limit:
                                 --          none of its background tasks start until then
                                 --        limit: its own ('max:<n>', 'share:<0..1>' or 'off', then ';rate:<r>' with a
                                 --          start rate, or 'rate:<r>' alone), written by integration-limit-12.lua;
                                 --          '': none, the default applies
                                 --      The field goes when it holds nothing (count 0, no wait, no limit). All in one hash,
                                 --      so that settle reads the totals and a batch's integrations in one call.
local waitingKey = KEYS[8]       -- ZSET balancer -> expiry (ms): balancers with tasks queued for this cluster
local waitingUserKey = KEYS[9]   -- ZSET balancer -> expiry (ms): balancers with user-present tasks queued
local unreachableKey = KEYS[10]  -- ZSET worker -> until (ms): balancers could not connect to it; out of `free`
                                 --      until the mark is cleared or, once expired, the worker's next heartbeat
-- Not in KEYS, so that every script keeps its 12 keys: built from unreachableKey, with its hash tag (keys.ts: ejectionReason).
local ejectionReasonKey = unreachableKey .. ':reason'  -- HASH worker -> why it is marked: 'unreachable' or 'failing'
local directoryKey = KEYS[11]    -- STRING: Redis's clock (us) at the last change of the workers or their addresses
local leasesPrefix = KEYS[12]    -- not a key but the start of one: leasesPrefix .. worker is the HASH of that
                                 --      worker's leases (lease -> time reserved, ms), one record per slot it counts in flight:
                                 --      a release frees a slot only by removing a record, so it counts once
-- Not in KEYS either (same hash tag, built from totalsKey; keys.ts: integrationRatePrefix):
local integrationRatePrefix = totalsKey .. ':integration-rate:'      -- not a key but the start of one: .. integration
                                 --      is the STRING of its start rate's GCRA (the theoretical arrival time, us), which
                                 --      expires when it falls due: a missing key is a full bucket (settle-12.lua)
local function integrationField(integration) return 'i:' .. integration end
-- ARGV[1] in every script: the slot-freed pub/sub channel.
local slotFreedChannel = ARGV[1]

-- One clock for every process: Redis's. (Callers' clocks may disagree by seconds, and a
-- balancer ahead of the others would sweep live workers.) Returns milliseconds and microseconds.
local function clock()
  local time = redis.call('TIME')
  local seconds, micros = tonumber(time[1]), tonumber(time[2])
  return seconds * 1000 + math.floor(micros / 1000), seconds * 1000000 + micros
end

-- A score in `free`: the free slots times turnPeriodUs, plus a turn in [0, turnPeriodUs) that
-- falls with the time (us) the worker last took a task (or changed otherwise), so that among
-- workers with as many free slots the one that waited longest goes first: ties are spread in
-- turn, nobody is herded, at no extra cost. (The turn repeats every 2^30 us, about 18 minutes.
-- After it wraps, a worker that took a task since looks as if it had waited longest: while tasks
-- come one at a time, such workers take the ties until the others are picked for having more
-- free slots. Random turns are no cure: a worker whose turn came out low would wait for ever.)
-- Scores are whole numbers (exact below 2^53: up to 2^22 slots), written as decimal strings:
-- Redis 7.0 formats a number argument, and every score it answers, with "%.17g", and a score
-- with a fraction took 17 digits each way (profiled: formatting and parsing doubles were 12% of
-- Redis's thread at 20,000 tasks/s; whole numbers print short).
local turnPeriodUs = 1073741824  -- 2^30
local oneSlot = '1073741824'     -- one slot, as an argument of ZADD INCR
local function freeScore(free, nowUs)
  return string.format('%d', free * turnPeriodUs + (turnPeriodUs - 1 - nowUs % turnPeriodUs))
end

local function freeOf(score)
  return math.floor(tonumber(score) / turnPeriodUs)
end

-- The integration a lease record is for: a record's field is "<nonce>|<integration>" (a nonce
-- holds no '|'), or "<nonce>" for a task of no integration (nil then).
local function leaseIntegration(field)
  local bar = string.find(field, '|', 1, true)
  if bar then return string.sub(field, bar + 1) end
  return nil
end

-- A stored limit's two parts: the in-flight part ('max:<n>', 'share:<x>', 'off'; nil when the
-- spec is a start rate alone) and the start rate (a number, nil when none). See integration-limits.ts.
local function splitLimitSpec(spec)
  if string.find(spec, 'rate:', 1, true) == 1 then return nil, tonumber(string.sub(spec, 6)) end
  local semi = string.find(spec, ';rate:', 1, true)
  if not semi then return spec, nil end
  return string.sub(spec, 1, semi - 1), tonumber(string.sub(spec, semi + 6))
end

-- An integration's field in totalsKey, read: its count, until when a user-present task waits at
-- its limit (0: none) and its own limit (false: none).
local function readIntegration(value)
  if not value then return 0, 0, false end
  local bar = string.find(value, '|', 1, true)
  if not bar then return tonumber(value), 0, false end
  local secondBar = string.find(value, '|', bar + 1, true)
  local limit = string.sub(value, secondBar + 1)
  return tonumber(string.sub(value, 1, bar - 1)), tonumber(string.sub(value, bar + 1, secondBar - 1)), limit ~= '' and limit
end

-- The field's value to store, or nil when it holds nothing (the field goes). A wait that ended by
-- `now` is dropped.
local function integrationValue(count, waitUntil, limit, now)
  if waitUntil <= now then waitUntil = 0 end
  if waitUntil == 0 and not limit then
    if count > 0 then return string.format('%d', count) end
    return nil
  end
  return string.format('%d|%d|%s', count, waitUntil, limit or '')
end

local function writeIntegration(field, count, waitUntil, limit, now)
  local value = integrationValue(count, waitUntil, limit, now)
  if value then redis.call('HSET', totalsKey, field, value) else redis.call('HDEL', totalsKey, field) end
end

-- Every write that adds or removes a lease record outside settle calls this (settle sums its
-- batch's changes per integration and writes them once), so that the per-integration counts are
-- the number of records, whatever path wrote them.
local function countLease(field, delta)
  local integration = leaseIntegration(field)
  if not integration then return end
  local name = integrationField(integration)
  local count, waitUntil, limit = readIntegration(redis.call('HGET', totalsKey, name))
  writeIntegration(name, math.max(0, count + delta), waitUntil, limit, 0)
end

-- What the ledger holds of a registered worker: { capacity, inflight, score } (score: its
-- score in `free`, false when it takes no tasks), or nil when it is not registered. `capacity`:
-- its max parallelism when the caller read it already (nil: read here).
local function workerState(worker, capacity)
  capacity = capacity or redis.call('HGET', workersKey, worker)
  if not capacity then return nil end
  capacity = tonumber(capacity)
  local score = redis.call('ZSCORE', freeKey, worker)
  if score then return { capacity = capacity, inflight = capacity - freeOf(score), score = score } end
  return { capacity = capacity, inflight = tonumber(redis.call('HGET', inflightKey, worker) or '0'), score = false }
end

-- The one place that changes a registered worker's slots outside the hot paths: it writes
-- capacity and in flight, keeps the free set and the cluster totals in step, and tells waiting
-- balancers when slots freed. capacity == nil removes the worker and everything it had.
-- active == false keeps it registered but out of `free` (its count then goes to `inflight`).
-- `stored` is what the caller already read of the worker (workerState's table, nil when
-- unknown): unchanged values are not written again (a heartbeat of a steady worker then writes
-- nothing here).
local function setWorker(worker, capacity, inflight, active, nowUs, stored)
  stored = stored or workerState(worker)
  local oldScore = stored and stored.score
  local oldCapacity, oldFree = 0, 0
  if oldScore then
    oldCapacity = stored.capacity
    oldFree = math.max(0, freeOf(oldScore))
  end
  local newCapacity, newFree = 0, 0
  if capacity == nil then
    redis.call('ZREM', freeKey, worker)
    redis.call('HDEL', workersKey, worker, worker .. '|held')
    redis.call('HDEL', inflightKey, worker)
    redis.call('HDEL', addressKey, worker)
    redis.call('ZREM', heartbeatKey, worker)
    redis.call('SREM', drainingKey, worker)
    redis.call('ZREM', unreachableKey, worker)
    redis.call('HDEL', ejectionReasonKey, worker)
    -- Its leases go with it (and out of their integrations' counts): a worker that comes back says what it runs.
    for _, field in ipairs(redis.call('HKEYS', leasesPrefix .. worker)) do countLease(field, -1) end
    redis.call('DEL', leasesPrefix .. worker)
  else
    if not stored or stored.capacity ~= capacity then redis.call('HSET', workersKey, worker, capacity) end
    if active then
      local free = capacity - inflight
      -- An unchanged free count keeps its place among the tied.
      if not oldScore or freeOf(oldScore) ~= free then redis.call('ZADD', freeKey, freeScore(free, nowUs), worker) end
      -- Its count now lives in its score.
      if stored and not oldScore and stored.inflight ~= 0 then redis.call('HDEL', inflightKey, worker) end
      newCapacity = capacity
      newFree = math.max(0, free)
    else
      if oldScore then redis.call('ZREM', freeKey, worker) end
      if oldScore or not stored or stored.inflight ~= inflight then redis.call('HSET', inflightKey, worker, inflight) end
    end
  end
  if newCapacity ~= oldCapacity then redis.call('HINCRBY', totalsKey, 'capacity', newCapacity - oldCapacity) end
  if newFree ~= oldFree then redis.call('HINCRBY', totalsKey, 'free', newFree - oldFree) end
  if newFree > oldFree and redis.call('ZCARD', waitingKey) > 0 then
    redis.call('PUBLISH', slotFreedChannel, worker)
  end
end

-- The workers changed (one joined or left, or an address changed): balancers re-read the list.
local function directoryChanged(nowUs)
  redis.call('SET', directoryKey, string.format('%d', nowUs))
end

-- After workers left: once the last one has, the cluster's keys that would outlive it go too
-- (totals of zero, the list's version), so a stopped fleet leaves nothing in Redis but the limits
-- operators set (the integrations' counts are 0 by then: their fields went, or hold a limit). A
-- balancer that read a version then sees none, a change, and reads the empty list once.
local function workersLeft(nowUs)
  if redis.call('HLEN', workersKey) == 0 then
    redis.call('HDEL', totalsKey, 'capacity', 'free')
    redis.call('DEL', directoryKey)
  else
    directoryChanged(nowUs)
  end
end
