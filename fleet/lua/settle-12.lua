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
--       7 the default limit's start rate (starts per second; 0: none)
--       8 number of releases R, then R lease ids
--       then the number of reservations N, then N groups: priority ('user'|'background'),
--       balancerId, wait (1: on failure, register the balancer as waiting), target worker ('' = least-loaded),
--       lease nonce (unique, no '|'), integration ('' = none: no limit), number of workers to skip S, then S worker ids
-- Returns: { { 1|0 per release: whether a lease was released },
--            { per reservation: { 'ok', worker, address, free slots it had, lease id } or { 'none', reason }
--              or { 'none', 'integration-at-limit', the limit (in flight) }
--              or { 'none', 'integration-at-rate', the start rate (text: it may have a fraction), ms until its next start } } }
--   The address is '' when the caller's directory version is current: it has every address then,
--   and one read of the version costs less than one of an address per reservation.
--   reasons: 'no-workers', 'full', 'kept-for-user-present', 'user-present-waiting', 'target-full',
--   'integration-at-limit' (the task's integration has as many leases as its limit, or, for a
--   background task, as many as its limit less the share kept for user-present tasks (ARGV 2,
--   rounded up, never the whole limit), or a user-present task of that integration waits at its
--   limit on some balancer that asked to wait: other integrations' tasks may still get slots, so a balancer keeps serving them),
--   'integration-at-rate' (the task's integration started as many tasks as its start rate allows:
--   likewise, and the balancer passes it over until the wait given)
--   The lease id is "<worker>|<nonce>" or "<worker>|<nonce>|<integration>": a release finds the
--   worker's leases from it, and the integration whose count it lowers.
-- An integration's limit is the one in its field of totalsKey ('max:<n>', 'share:<x>' of the
-- cluster's capacity, rounded up, or 'off'), else the default: max(ceil(share x capacity), floor).
-- It is read at each call, so a change holds from the next settle on.
-- An integration's start rate (its limit's ';rate:<r>', or the default's when it has no limit of its
-- own) is a GCRA: its key (integrationRatePrefix .. integration) holds the theoretical arrival time
-- (TAT, Redis's clock in us) of its next start, and the interval it was written with. Each start
-- moves the TAT on by one emission interval (1e6 / r us); a start is refused while it would move it
-- more than the tolerance past now. The tolerance is one second (at least one interval): a burst
-- of one second of the rate.
-- A background start must leave the kept share (ARGV 2) of the burst in hand, never all of it.
-- The key expires at the TAT, when the bucket is full again, so an idle integration leaves nothing.
--@include ledger
local keptShare, waiterTtlMs, knownDirectory = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local defaultLimitShare, defaultLimitFloor, defaultStartRate = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local now, nowUs = clock()
local nowText = string.format('%d', now)  -- each lease's record: written as text once (see freeScore)

-- Releases. The totals' free count, the integrations' counts and the wake-up are written once for the batch.
local released, freedInTotals, freedWorker = {}, 0, nil
local integrationDeltas = {}  -- integration -> change of its count in this batch, written at the end
local function countInBatch(integration, delta)
  integrationDeltas[integration] = (integrationDeltas[integration] or 0) + delta
end
local at = 8
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

-- Reservations. The totals are read once (with the batch's integrations: readIntegrations) and
-- kept here as they change.
local reservationCount = tonumber(ARGV[at])
local results = {}
local totalsRead = false
local totalCapacity, totalFree = 0, 0
local taken = 0
local waitingUser = nil
local addressesKnown = nil
local function readTotals()
  if not totalsRead then
    totalsRead = true
    local totals = redis.call('HMGET', totalsKey, 'capacity', 'free')
    totalCapacity, totalFree = tonumber(totals[1] or '0'), tonumber(totals[2] or '0') + freedInTotals
  end
end

-- Per integration this batch reserves for or releases: { countBefore, userWaitingUntil, ownLimit
-- (its stored limit, false: none), and for one it reserves for: inflight, limit, backgroundLimit,
-- and with a start rate: rate, intervalUs, toleranceUs, keptUs, tat }, counted here as leases are
-- taken (the counts and TATs written at the end). Read with the totals in one call for the whole
-- batch, not one per integration or per kind: with tasks spread over many integrations, nearly
-- every reservation names one the batch has not met yet, and the batches of a busy fleet's
-- balancers are small, so that each call the script makes counts.
local integrations = {}
local oneSecondUs = 1000000
-- The TAT stored as "<tat>:<emission interval us>" (false: none, a full bucket). Written under
-- another rate, it is carried over as the starts it leaves in hand, up to the new burst, so a rate
-- change holds from the next call without forgiving or inventing a second of debt (and is written
-- back at once: the old interval would go on refilling at the old rate). Returns the TAT and whether to write it.
local function storedTat(stored, state)
  if not stored then return 0, false end
  local colon = string.find(stored, ':', 1, true)
  if not colon then return 0, false end
  local tat, intervalUs = tonumber(string.sub(stored, 1, colon - 1)), tonumber(string.sub(stored, colon + 1))
  if intervalUs == state.intervalUs then return tat, false end
  local inHand = (math.max(oneSecondUs, intervalUs) - math.max(0, tat - nowUs)) / intervalUs
  inHand = math.max(0, math.min(inHand, state.toleranceUs / state.intervalUs))
  return nowUs + state.toleranceUs - inHand * state.intervalUs, true
end
-- The state of an integration this batch reserves for, from what its field (named `field`)
-- holds: its limits from its own (false: none, the default applies), and its count with this
-- batch's releases, which are not written yet.
local function integrationState(integration, field, count, waitUntil, ownLimit)
  local inFlight, rate = nil, nil
  if ownLimit then inFlight, rate = splitLimitSpec(ownLimit)
  elseif defaultStartRate > 0 then rate = defaultStartRate end
  local limit
  -- (string.find at 1 rather than comparing a string.sub: no new string per call.)
  if inFlight == 'off' or (not inFlight and defaultLimitShare <= 0) then limit = math.huge
  elseif inFlight and string.find(inFlight, 'max:', 1, true) == 1 then limit = tonumber(string.sub(inFlight, 5)) or math.huge
  elseif inFlight and string.find(inFlight, 'share:', 1, true) == 1 then limit = math.ceil((tonumber(string.sub(inFlight, 7)) or 1) * totalCapacity)
  else limit = math.max(math.ceil(defaultLimitShare * totalCapacity), defaultLimitFloor) end
  -- Kept for its user-present tasks, as the cluster keeps slots: a share of the limit, never all of
  -- it. Without it, a background flood holds the integration at its limit and each user-present
  -- task waits for one of its releases (one per task time / limit), however many slots are free.
  local kept = 0
  if limit < math.huge then kept = math.min(math.ceil(keptShare * limit), math.max(0, limit - 1)) end
  local state = {
    countBefore = count, userWaitingUntil = waitUntil, ownLimit = ownLimit, waitSet = false, field = field,
    inflight = count + (integrationDeltas[integration] or 0), limit = limit, backgroundLimit = limit - kept,
  }
  if rate and rate > 0 then
    state.rate, state.intervalUs = rate, oneSecondUs / rate
    state.toleranceUs = math.max(oneSecondUs, state.intervalUs)
    -- Kept for user-present tasks, like slots: a share of the burst, but never all of it (a burst of one start keeps none).
    state.keptUs = math.min(keptShare * state.toleranceUs, state.toleranceUs - state.intervalUs)
    state.tat, state.changed = storedTat(redis.call('GET', integrationRatePrefix .. integration), state)
  end
  return state
end
local function readIntegrations()
  local reserved, names, fields, from = {}, {}, { 'capacity', 'free' }, at
  for r = 1, reservationCount do
    local integration = ARGV[from + 6]
    if integration ~= '' and not reserved[integration] then
      reserved[integration] = true
      names[#names + 1] = integration
      fields[#fields + 1] = integrationField(integration)
    end
    from = from + 7 + tonumber(ARGV[from + 7])
  end
  for integration in pairs(integrationDeltas) do
    if not reserved[integration] then
      names[#names + 1] = integration
      fields[#fields + 1] = integrationField(integration)
    end
  end
  if #names == 0 then return end
  local values = redis.call('HMGET', totalsKey, unpack(fields))
  totalsRead = true
  totalCapacity, totalFree = tonumber(values[1] or '0'), tonumber(values[2] or '0') + freedInTotals
  for i = 1, #names do
    local integration = names[i]
    local field, count, waitUntil, ownLimit = fields[i + 2], readIntegration(values[i + 2])
    if reserved[integration] then integrations[integration] = integrationState(integration, field, count, waitUntil, ownLimit)
    else integrations[integration] = { field = field, countBefore = count, userWaitingUntil = waitUntil, ownLimit = ownLimit, waitSet = false } end
  end
end
readIntegrations()

-- The us until the integration's next start of this priority is allowed (0: now), by its GCRA: a
-- background start leaves the kept share of the burst in hand, so user-present tasks still go first.
local function rateWaitUs(state, priority)
  local after = math.max(state.tat, nowUs) + state.intervalUs
  local toleranceUs = state.toleranceUs - (priority == 'user' and 0 or state.keptUs)
  return math.max(0, after - nowUs - toleranceUs)
end
for r = 1, reservationCount do
  local priority, balancer, wait = ARGV[at + 1], ARGV[at + 2], ARGV[at + 3] == '1'
  local target, nonce, integration, skipCount = ARGV[at + 4], ARGV[at + 5], ARGV[at + 6], tonumber(ARGV[at + 7])
  local skipFrom, skipTo = at + 8, at + 7 + skipCount
  at = skipTo

  local reason, limited, waitUs = nil, nil, 0
  if integration ~= '' then
    limited = integrations[integration]
    if limited.inflight >= limited.limit then reason = 'integration-at-limit'
    -- A user-present task waits at this integration's limit on some balancer: the integration's
    -- next slot is its, not a background task's of another balancer.
    elseif priority ~= 'user' and limited.userWaitingUntil > now then reason = 'integration-at-limit'
    elseif limited.rate then
      waitUs = rateWaitUs(limited, priority)
      if waitUs > 0 then reason = 'integration-at-rate' end
    end
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
      -- Checked after the cluster's share, so that where the cluster is what holds background work
      -- back (an integration whose limit is the whole cluster), the reason says so.
      elseif limited and limited.inflight >= limited.backgroundLimit then
        reason = 'integration-at-limit'
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
      if limited.rate then
        limited.tat = math.max(limited.tat, nowUs) + limited.intervalUs
        limited.changed = true
      end
    end
    if addressesKnown == nil then addressesKnown = knownDirectory ~= '' and redis.call('GET', directoryKey) == knownDirectory end
    results[r] = { 'ok', worker, addressesKnown and '' or redis.call('HGET', addressKey, worker), free, worker .. '|' .. nonce }
  else
    if wait then
      redis.call('ZADD', waitingKey, now + waiterTtlMs, balancer)
      if priority == 'user' and reason == 'integration-at-limit' then
        limited.userWaitingUntil = now + waiterTtlMs
        limited.waitSet = true
      end
      -- A user-present task at its integration's limit (or rate) waits for that integration alone;
      -- it does not hold back other integrations' background work.
      if priority == 'user' and reason ~= 'integration-at-limit' and reason ~= 'integration-at-rate' then
        redis.call('ZADD', waitingUserKey, now + waiterTtlMs, balancer)
        -- The background reservations after it in this batch hold back too.
        waitingUser = true
      end
    end
    if reason == 'integration-at-limit' then
      results[r] = { 'none', reason, limited.limit == math.huge and -1 or limited.limit }
    elseif reason == 'integration-at-rate' then
      results[r] = { 'none', reason, string.format('%.15g', limited.rate), math.ceil(waitUs / 1000) }
    else
      results[r] = { 'none', reason }
    end
  end
end

-- Every changed count and user-present wait, and the free total, in one write; the integrations
-- left holding nothing in one delete. Nothing else in this call wrote them since they were read.
-- Each integration that started tasks under a start rate (or whose rate changed): its TAT, kept
-- until it falls due (whole us, rounded up: a start is never allowed early).
local writes, removed = {}, {}
-- An integration a user-present task waits for (on another balancer, or in an earlier call) came
-- under its limit: that waiter is told even when the cluster's freed slots were taken again here.
local integrationFreed = false
for integration, state in pairs(integrations) do
  local count = math.max(0, state.countBefore + (integrationDeltas[integration] or 0))
  if count < state.countBefore and state.userWaitingUntil > now and not state.waitSet then integrationFreed = true end
  if count ~= state.countBefore or state.waitSet or (state.userWaitingUntil > 0 and state.userWaitingUntil <= now) then
    local value = integrationValue(count, state.userWaitingUntil, state.ownLimit, now)
    if value then
      writes[#writes + 1] = state.field
      writes[#writes + 1] = value
    else
      removed[#removed + 1] = state.field
    end
  end
  if state.rate and state.changed and state.tat > nowUs then
    local tat = math.ceil(state.tat)
    redis.call('SET', integrationRatePrefix .. integration, string.format('%d:%.17g', tat, state.intervalUs), 'PX', math.max(1, math.ceil((tat - nowUs) / 1000)))
  end
end
if freedInTotals ~= taken then
  if totalsRead then
    writes[#writes + 1] = 'free'
    writes[#writes + 1] = totalFree - taken
  else
    redis.call('HINCRBY', totalsKey, 'free', freedInTotals - taken)
  end
end
if #writes > 0 then redis.call('HSET', totalsKey, unpack(writes)) end
if #removed > 0 then redis.call('HDEL', totalsKey, unpack(removed)) end
-- Slots freed that this batch did not take again: tell waiting balancers.
if (freedInTotals > taken or integrationFreed) and redis.call('ZCARD', waitingKey) > 0 then
  redis.call('PUBLISH', slotFreedChannel, freedWorker or '')
end
return { released, results }
