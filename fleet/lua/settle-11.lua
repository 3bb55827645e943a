-- settle: one balancer's batch of releases and reservations for one cluster, in one call (the
-- balancer collects them for up to a couple of milliseconds, see src/ledger-batcher.ts): what a
-- call to Redis costs is paid once for the batch, and each lease costs a handful of commands.
-- Releases run first, so that the slots they free are there for the reservations.
--
-- A reservation takes one slot on the live worker with the most free slots (of those tied, the
-- one that waited longest), or on one named worker, and records a lease for it. Draining
-- workers and workers marked unreachable are not in `free`: they cost nothing.
-- A release ends a lease and gives its slot back. Releasing a lease twice, or one whose worker
-- left (or whose record a heartbeat cleared), changes nothing: the worker's next heartbeats
-- settle its count either way. A release "answered" follows the worker's answer to the task:
-- the worker counted it among the tasks it answered, and the heartbeat matches the two counts.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 share of capacity kept for user-present (0..1)  3 waiterTtlMs
--       4 the directory version (see totalsKey) whose addresses the caller holds ('' for none)
--       5 the balancer asking (recorded as waiting when a reservation that may wait finds no slot)
--       then the releases that follow an answer: their number A, then A lease ids;
--       then the releases of leases not used: their number U, then U lease ids;
--       then the reservations: their number N, then N groups: a mode, the lease nonce (unique),
--       and for the modes ending in '/pick' a target worker ('' = least-loaded), the number of
--       workers to skip S, then S worker ids. Modes: 'user', 'background' (priority), with '/wait'
--       (on failure, register the balancer as waiting) and then '/pick' when they name workers:
--       e.g. 'background/wait', 'user/wait/pick'. (One argument for what is nearly always the
--       same: each argument costs Redis a parse and the script a string.)
-- Returns: { { 1|0 per release, answered ones first: whether a lease was released },
--            { per reservation: { worker, free slots it had[, address] } or { '', reason } } }
--   The address comes only when the caller's directory version is not current: the caller
--   has every address otherwise, and one read of the version costs less than one of an address per
--   reservation. The lease id is "<worker>|<nonce>" (the caller builds it): a release finds the
--   worker's leases from it.
--   reasons: 'no-workers', 'full', 'kept-for-user-present', 'user-present-waiting', 'target-full'
--
-- Per call, besides its leases: Redis's clock, one read of the totals, and one write of them
-- when the batch changed the free count (the waiting balancers' wake-up when it freed slots).
--@include ledger
local keptShare, waiterTtlMs, knownDirectory, balancer = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
local now, nowUs = clock()
local totals = redis.call('HMGET', totalsKey, 'capacity', 'free', 'directory', 'waiting-until', 'user-waiting-until')
local totalCapacity, totalFree = tonumber(totals[1] or '0'), tonumber(totals[2] or '0')
local waitingUntil, userWaitingUntil = tonumber(totals[4] or '0'), tonumber(totals[5] or '0')

-- Releases: the answered ones, then the unused ones.
local released, freedInTotals, freedWorker = {}, 0, nil
local at = 6
for _, answered in ipairs({ true, false }) do
  local count = tonumber(ARGV[at])
  for i = at + 1, at + count do
    local lease = ARGV[i]
    local bar = string.find(lease, '|', 1, true)
    local done = 0
    if bar then
      local worker, nonce = string.sub(lease, 1, bar - 1), string.sub(lease, bar + 1)
      local held = redis.call('HDEL', leasesPrefix .. worker, nonce) == 1
      -- The answer it follows is matched even when the lease's record is gone (a heartbeat
      -- dropped it, or Redis lost it), as long as the worker is registered.
      if answered and (held or redis.call('HEXISTS', workersKey, worker) == 1) then
        redis.call('HINCRBY', workersKey, worker .. '|acked', 1)
      end
      if held then
        done = 1
        -- A worker in `free` holds its count there (XX): the slot returns keeping its place in the
        -- turn. One out of it (draining, marked unreachable) holds it in `inflight`.
        local score = redis.call('ZADD', freeKey, 'XX', 'INCR', 1, worker)
        if score then
          if freeOf(score) >= 1 then
            freedInTotals = freedInTotals + 1
            freedWorker = worker
          end
        elseif redis.call('HINCRBY', inflightKey, worker, -1) < 0 then
          redis.call('HSET', inflightKey, worker, 0)
        end
      end
    end
    released[#released + 1] = done
  end
  at = at + count + 1
end
totalFree = totalFree + freedInTotals

-- Reservations. The totals are kept here as they change.
local reservationCount = tonumber(ARGV[at])
at = at + 1
local results = {}
local taken = 0
-- Priority holds across balancers: no background task starts while a user-present one waits
-- (entries past their expiry do not count).
local userWaits = userWaitingUntil > now
local addressesKnown = knownDirectory ~= '' and totals[3] == knownDirectory
local waitsUntil, userWaitsUntil = waitingUntil, userWaitingUntil
-- The top of `free`, read once for the batch's least-loaded picks: { worker, score } from the
-- highest score down, each pick written back in its place. N picks need the top N: each takes one
-- entry at most out of the order, so one read entry not yet picked stays above all unread ones.
local top = nil

-- Whether entry a = { worker, score } comes before b in `free` read from the top (ZREVRANGE:
-- higher score first, then the member later in byte order).
local function above(a, b)
  return a[2] > b[2] or (a[2] == b[2] and a[1] > b[1])
end

for r = 1, reservationCount do
  local mode, nonce = ARGV[at], ARGV[at + 1]
  at = at + 2
  local user = mode == 'user' or mode == 'user/wait' or mode == 'user/pick' or mode == 'user/wait/pick'
  local wait = mode == 'background/wait' or mode == 'user/wait' or mode == 'background/wait/pick' or mode == 'user/wait/pick'
  local target, skipCount = '', 0
  if mode == 'background/pick' or mode == 'background/wait/pick' or mode == 'user/pick' or mode == 'user/wait/pick' then
    target, skipCount = ARGV[at], tonumber(ARGV[at + 1])
    at = at + 2
  end
  local skipFrom, skipTo = at, at + skipCount - 1
  at = at + skipCount

  local reason = nil
  if not user then
    if userWaits then
      reason = 'user-present-waiting'
    else
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
      -- A pick outside the read top may change its order: read it again at the next pick.
      top = nil
      free = freeOf(redis.call('ZSCORE', freeKey, target) or '0')
      if free < 1 then reason = 'target-full' else worker = target end
    elseif skipCount == 0 then
      if not top then
        local read = redis.call('ZREVRANGE', freeKey, 0, reservationCount - r, 'WITHSCORES')
        top = {}
        for i = 1, #read, 2 do top[#top + 1] = { read[i], tonumber(read[i + 1]) } end
      end
      if #top == 0 then reason = 'no-workers'
      else
        worker, free = top[1][1], freeOf(top[1][2])
        if free < 1 then worker, reason = nil, 'full' end
      end
    else
      top = nil
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
    -- Each pick of the batch is a microsecond newer than the one before, so that the batch takes
    -- turns as calls one at a time would.
    local score = freeScore(free - 1, nowUs + taken)
    redis.call('ZADD', freeKey, score, worker)
    if top and top[1] and top[1][1] == worker then
      -- Its new score moves it down to its place in the top read.
      local entry, i = { worker, score }, 1
      while top[i + 1] and above(top[i + 1], entry) do
        top[i] = top[i + 1]
        i = i + 1
      end
      top[i] = entry
    end
    redis.call('HINCRBY', workersKey, worker .. '|reserved', 1)
    redis.call('HSET', leasesPrefix .. worker, nonce, now)
    taken = taken + 1
    if addressesKnown then results[r] = { worker, free }
    else results[r] = { worker, free, redis.call('HGET', addressKey, worker) or '' } end
  else
    if wait then
      local expiry = now + waiterTtlMs
      redis.call('ZADD', waitingKey, expiry, balancer)
      waitsUntil = math.max(waitsUntil, expiry)
      if user then
        redis.call('ZADD', waitingUserKey, expiry, balancer)
        userWaitsUntil = math.max(userWaitsUntil, expiry)
        -- The background reservations after it in this batch hold back too.
        userWaits = true
      end
    end
    results[r] = { '', reason }
  end
end

-- The totals, written once for the batch: what it changed.
if freedInTotals ~= taken then redis.call('HINCRBY', totalsKey, 'free', freedInTotals - taken) end
if waitsUntil > waitingUntil then redis.call('HSET', totalsKey, 'waiting-until', waitsUntil) end
if userWaitsUntil > userWaitingUntil then redis.call('HSET', totalsKey, 'user-waiting-until', userWaitsUntil) end
-- Slots freed that this batch did not take again: tell waiting balancers.
if freedInTotals > taken and waitsUntil > now then
  redis.call('PUBLISH', slotFreedChannel, freedWorker)
end
return { released, results }
