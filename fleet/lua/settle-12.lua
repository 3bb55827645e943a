-- settle: one balancer's batch of releases and reservations for one cluster, in one call (the
-- balancer collects them for up to a couple of milliseconds, see src/ledger-batcher.ts): what a
-- call to Redis costs is paid once for the batch, and each lease costs a handful of commands.
-- Releases run first, so that the slots they free are there for the reservations.
--
-- A reservation takes one slot on the live worker with the most free slots (of those tied, the
-- one that waited longest), or on one named worker, and records a lease for it. Draining
-- workers and workers marked unreachable are not in `free`: they cost nothing.
-- A release ends a lease and gives its slot back. Releasing a lease twice, or one whose worker
-- left (or whose record a heartbeat dropped), changes nothing: a slot is freed once, by whichever
-- comes first (see heartbeat-12.lua).
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 share of capacity kept for user-present (0..1)  3 waiterTtlMs
--       4 the directory version (see directoryKey) whose addresses the caller holds ('' for none)
--       5 default integration limit, as a share of the cluster's capacity (0..1; 0: no default limit)
--       6 the default limit's floor (in flight), so that a small cluster still runs an integration's tasks
--       7 number of releases R, then R lease ids
--       then the number of reservations N, then N groups: priority ('user'|'background'),
--       balancerId, wait (1: on failure, register the balancer as waiting), target worker ('' = least-loaded),
--       lease nonce (unique, no '|'), integration ('' = none: no limit), number of workers to skip S, then S worker ids
-- Returns: { { 1|0 per release: whether a lease was released },
--            { per reservation: { 'ok', worker, address, free slots it had, lease id } or { 'none', reason }
--              or { 'none', 'integration-at-limit', the limit (in flight) } } }
--   The address is '' when the caller's directory version is current: it has every address then,
--   and one read of the version costs less than one of an address per reservation.
--   reasons: 'no-workers', 'full', 'kept-for-user-present', 'user-present-waiting', 'target-full',
--   'integration-at-limit' (the task's integration has as many leases as its limit: other
--   integrations' tasks may still get slots, so a balancer keeps serving them)
--   The lease id is "<worker>|<nonce>" or "<worker>|<nonce>|<integration>": a release finds the
--   worker's leases from it, and the integration whose count it lowers.
-- An integration's limit is its field in integrationLimitsKey ('max:<n>', 'share:<x>' of the
-- cluster's capacity, rounded up, or 'off'), else the default: max(ceil(share x capacity), floor).
-- It is read at each call, so a change holds from the next settle on.
--@include ledger
local keptShare, waiterTtlMs, knownDirectory = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local defaultLimitShare, defaultLimitFloor = tonumber(ARGV[5]), tonumber(ARGV[6])
local now, nowUs = clock()
local nowText = string.format('%d', now)  -- each lease's record: written as text once (see freeScore)

-- Releases. The totals' free count, the integrations' counts and the wake-up are written once for the batch.
local released, freedInTotals, freedWorker = {}, 0, nil
local integrationDeltas = {}  -- integration -> change of its count in this batch, written at the end
local function countInBatch(integration, delta)
  integrationDeltas[integration] = (integrationDeltas[integration] or 0) + delta
end
local at = 7
local releaseCount = tonumber(ARGV[at])
for i = 1, releaseCount do
  local lease = ARGV[at + i]
  local bar = string.find(lease, '|', 1, true)
  local done = 0
  if bar then
    local worker, nonce = string.sub(lease, 1, bar - 1), string.sub(lease, bar + 1)
    if redis.call('HDEL', leasesPrefix .. worker, nonce) == 1 then
      done = 1
      local integration = leaseIntegration(nonce)
      if integration then countInBatch(integration, -1) end
      -- A worker in `free` holds its count there (XX): the slot returns keeping its place in the
      -- turn. One out of it (draining, marked unreachable) holds it in `inflight`.
      local score = redis.call('ZADD', freeKey, 'XX', 'INCR', oneSlot, worker)
      if score then
        if freeOf(score) >= 1 then
          freedInTotals = freedInTotals + 1
          freedWorker = worker
        end
      elseif redis.call('HINCRBY', inflightKey, worker, '-1') < 0 then
        redis.call('HSET', inflightKey, worker, 0)
      end
    end
  end
  released[i] = done
end
at = at + releaseCount + 1

-- Reservations. The totals are read once and kept here as they change.
local reservationCount = tonumber(ARGV[at])
local results = {}
local totals = nil
local totalCapacity, totalFree = 0, 0
local taken = 0
local waitingUser = nil
local addressesKnown = nil
local function readTotals()
  if not totals then
    totals = redis.call('HMGET', totalsKey, 'capacity', 'free')
    totalCapacity, totalFree = tonumber(totals[1] or '0'), tonumber(totals[2] or '0') + freedInTotals
  end
end

local function limitOf(spec)
  if spec == 'off' or (not spec and defaultLimitShare <= 0) then return math.huge
  elseif spec and string.sub(spec, 1, 4) == 'max:' then return tonumber(string.sub(spec, 5)) or math.huge
  elseif spec and string.sub(spec, 1, 6) == 'share:' then return math.ceil((tonumber(string.sub(spec, 7)) or 1) * totalCapacity)
  end
  return math.max(math.ceil(defaultLimitShare * totalCapacity), defaultLimitFloor)
end

-- Per integration of this batch's reservations: { inflight, limit }, counted here as leases are
-- taken. `countBefore`: every integration whose count this batch changes, as it was before it.
-- Read in one call per hash for the whole batch, not one per integration: with tasks spread over
-- many integrations, nearly every reservation names one the batch has not met yet.
local integrations, countBefore = {}, {}
local function readIntegrations()
  local names, limited, from = {}, {}, at
  for r = 1, reservationCount do
    local integration = ARGV[from + 6]
    if integration ~= '' and not integrations[integration] then
      integrations[integration] = true
      limited[#limited + 1] = integration
    end
    from = from + 7 + tonumber(ARGV[from + 7])
  end
  for i = 1, #limited do names[i] = limited[i] end
  for integration in pairs(integrationDeltas) do
    if not integrations[integration] then names[#names + 1] = integration end
  end
  if #names == 0 then return end
  local counts = redis.call('HMGET', integrationInflightKey, unpack(names))
  for i = 1, #names do countBefore[names[i]] = tonumber(counts[i] or '0') end
  if #limited == 0 then return end
  readTotals()
  local specs = redis.call('HMGET', integrationLimitsKey, unpack(limited))
  for i = 1, #limited do
    local integration = limited[i]
    -- The releases of this batch are not written yet: their changes count here.
    integrations[integration] = { inflight = countBefore[integration] + (integrationDeltas[integration] or 0), limit = limitOf(specs[i] or nil) }
  end
end
readIntegrations()
for r = 1, reservationCount do
  local priority, balancer, wait = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3] == '1'
  local target, nonce, integration, skipCount = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6], tonumber(ARGV[at + 7])
  local skipFrom, skipTo = at + 8, at + 7 + skipCount
  at = skipTo

  local reason, limited = nil, nil
  if integration ~= '' then
    limited = integrations[integration]
    if limited.inflight >= limited.limit then reason = 'integration-at-limit' end
    nonce = nonce .. '|' .. integration
  end
  if reason then
    -- Checked first: this task waits for its own integration, and holds nobody else back.
  elseif priority ~= 'user' then
    -- Priority holds across balancers: no background task starts while a user-present one waits
    -- (entries past their expiry do not count; the sweep removes them).
    if waitingUser == nil then waitingUser = redis.call('ZCOUNT', waitingUserKey, '(' .. now, '+inf') > 0 end
    if waitingUser then
      reason = 'user-present-waiting'
    else
      readTotals()
      local free = totalFree - taken
      -- Keep ceil(share x capacity) slots, but never all of them: a one-slot cluster still runs background work.
      local kept = math.min(math.ceil(keptShare * totalCapacity), math.max(0, totalCapacity - 1))
      if free - 1 < kept then
        if totalCapacity == 0 then reason = 'no-workers'
        elseif free <= 0 then reason = 'full'
        else reason = 'kept-for-user-present' end
      end
    end
  end

  local worker, free
  if not reason then
    if target ~= '' then
      free = freeOf(redis.call('ZSCORE', freeKey, target) or '0')
      if free < 1 then reason = 'target-full' else worker = target end
    elseif skipCount == 0 then
      local top = redis.call('ZREVRANGE', freeKey, 0, 0, 'WITHSCORES')
      if #top == 0 then reason = 'no-workers'
      else
        worker, free = top[1], freeOf(top[2])
        if free < 1 then worker, reason = nil, 'full' end
      end
    else
      local skip = {}
      for i = skipFrom, skipTo do skip[ARGV[i]] = true end
      local candidates = redis.call('ZREVRANGE', freeKey, 0, skipCount, 'WITHSCORES')
      if #candidates == 0 then reason = 'no-workers' end
      for i = 1, #candidates, 2 do
        if not skip[candidates[i]] and freeOf(candidates[i + 1]) >= 1 then
          worker, free = candidates[i], freeOf(candidates[i + 1])
          break
        end
      end
      if not worker and not reason then reason = 'full' end
    end
  end

  if worker then
    -- The hot path: only what changes is written (free >= 1, so the totals lose exactly one).
    -- Each pick of the batch counts as a microsecond later than the one before, so that workers
    -- tied again after each took a slot in this call keep their turn (the first taken, first again).
    redis.call('ZADD', freeKey, freeScore(free - 1, nowUs + taken), worker)
    redis.call('HSET', leasesPrefix .. worker, nonce, nowText)
    taken = taken + 1
    if limited then
      limited.inflight = limited.inflight + 1
      countInBatch(integration, 1)
    end
    if addressesKnown == nil then addressesKnown = knownDirectory ~= '' and redis.call('GET', directoryKey) == knownDirectory end
    results[r] = { 'ok', worker, addressesKnown and '' or redis.call('HGET', addressKey, worker), free, worker .. '|' .. nonce }
  else
    if wait then
      redis.call('ZADD', waitingKey, now + waiterTtlMs, balancer)
      -- A user-present task at its integration's limit waits for a release of that integration;
      -- it does not hold back other integrations' background work.
      if priority == 'user' and reason ~= 'integration-at-limit' then
        redis.call('ZADD', waitingUserKey, now + waiterTtlMs, balancer)
        -- The background reservations after it in this batch hold back too.
        waitingUser = true
      end
    end
    if reason == 'integration-at-limit' then
      results[r] = { 'none', reason, limited.limit == math.huge and -1 or limited.limit }
    else
      results[r] = { 'none', reason }
    end
  end
end

if freedInTotals ~= taken then redis.call('HINCRBY', totalsKey, 'free', freedInTotals - taken) end
-- Every changed count in one write (and one delete for those that reached 0: the hash holds only
-- integrations with tasks in flight). Nothing else in this call wrote them since they were read.
local counts, emptied = {}, {}
for integration, delta in pairs(integrationDeltas) do
  if delta ~= 0 then
    local count = countBefore[integration] + delta
    if count > 0 then
      counts[#counts + 1] = integration
      counts[#counts + 1] = count
    else
      emptied[#emptied + 1] = integration
    end
  end
end
if #counts > 0 then redis.call('HSET', integrationInflightKey, unpack(counts)) end
if #emptied > 0 then redis.call('HDEL', integrationInflightKey, unpack(emptied)) end
-- Slots freed that this batch did not take again: tell waiting balancers.
if freedInTotals > taken and redis.call('ZCARD', waitingKey) > 0 then
  redis.call('PUBLISH', slotFreedChannel, freedWorker)
end
return { released, results }
