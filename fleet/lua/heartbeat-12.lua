-- heartbeat: registers the worker (again, after Redis lost its data or a sweep removed it),
-- settles its in-flight count against what it runs, and says whether an operator asked it to
-- drain and whether balancers marked it unreachable. An expired unreachable mark ends here.
-- Its cost does not grow with what the worker runs: leases are not renewed one by one.
--
-- The count: the ledger's leases of the worker are those it runs, those on their way to it,
-- those it answered whose release is on its way back (the balancer that got the answer
-- releases the lease, batched with its other calls), and those nobody will release (a balancer
-- died between reserve and dispatch or before its release went out, a release was lost).
-- On their way can only be leases reserved since its previous heartbeat or in the period
-- before that; on their way back only answers given in the same two periods whose releases
-- have not arrived (the worker counts its answers, the ledger the releases that followed one).
-- So the count is set within [running + answered and not released, that + reservations of
-- those periods]: a lost lease is dropped at the worker's third heartbeat after it was reserved
-- or answered (two to three periods), and leases Redis lost come back at the first. (A
-- heartbeat that Redis runs after releases of answers it does not report yet raises the count
-- to what it says runs less those tasks: their releases ended them already.)
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 workerId  3 address  4 capacity  5 draining (0|1)
--       6 running: tasks the worker holds (admitted, neither answered nor released by itself)
--       7 answered: tasks it has answered since it started (a count that only grows), whose
--         release it leaves to the balancer that receives the answer
--       8 '1' when this process's previous heartbeat succeeded with the same address (the
--         address is then not read to compare; a registration that was lost writes it anyway)
-- Returns: { drain requested (0|1), in flight, marked unreachable (0|1), workers in the cluster
--   (the worker's period scales with it above a size: Ledger.heartbeatScale) }
--@include ledger
local worker, address, capacity = ARGV[2], ARGV[3], tonumber(ARGV[4])
local running, answered = tonumber(ARGV[6]), tonumber(ARGV[7])
local now, nowUs = clock()

-- A steady worker's heartbeat is 5 commands: this read, its score, its heartbeat time, the
-- cluster's size and TIME.
local stored = redis.call('HMGET', workersKey, worker, worker .. '|reserved', worker .. '|before', worker .. '|acked', worker .. '|e1', worker .. '|e2')
local state = stored[1] and workerState(worker, stored[1])
local inflight = state and state.inflight or 0
local sinceLast, before = tonumber(stored[2] or '0'), tonumber(stored[3] or '0')
local onTheirWay = sinceLast + before
local acked, answeredBefore, answeredTwoBefore = tonumber(stored[4]), tonumber(stored[5]), tonumber(stored[6])
if not acked or not answeredBefore or not answeredTwoBefore or answered < answeredBefore then
  -- First heartbeat of this registration (or of a new process under the same id): releases of
  -- answers given before it find no lease record and count for nothing.
  acked, answeredBefore, answeredTwoBefore = answered, answered, answered
end
-- Releases can be ahead of answers: a release reached Redis before the heartbeat that was on its
-- way with the answer's count (another connection), or followed an answer from before this
-- registration. None is on its way back then; the excess is forgotten once nothing can be (the
-- worker idle, no answer or reservation in the last two periods), not at once, so that the
-- first case does not leave an answer unmatched.
local comingBack = math.max(0, math.min(answered - acked, answered - answeredTwoBefore))
-- In the first case the worker still counts those tasks as running, but their releases ended
-- them: they do not raise the count (they would stay counted while leases are on their way).
local endedButRunning = math.max(0, acked - answered)
if acked > answered and running == 0 and onTheirWay == 0 and answered == answeredTwoBefore then acked = answered end
local lower = running + comingBack
local settled = math.min(math.max(inflight, lower - endedButRunning), lower + onTheirWay)
-- This period's reservations and answers become the period before (an idle worker's stay as they are).
if onTheirWay > 0 or answered ~= answeredBefore or answeredBefore ~= answeredTwoBefore or tonumber(stored[4]) ~= acked then
  redis.call('HSET', workersKey, worker .. '|reserved', 0, worker .. '|before', sinceLast, worker .. '|acked', acked, worker .. '|e1', answered, worker .. '|e2', answeredBefore)
end
if settled < inflight then
  -- Leases dropped: which ones is not known, so no lease record is kept. A release of a lease
  -- from before then changes nothing (nothing is freed twice), and the slots of the tasks still
  -- running are freed by the heartbeats that follow their end (at most one period late).
  redis.call('DEL', leasesPrefix .. worker)
end

if not state or ARGV[8] ~= '1' and redis.call('HGET', addressKey, worker) ~= address then
  redis.call('HSET', addressKey, worker, address)
  directoryChanged(nowUs)
end
redis.call('ZADD', heartbeatKey, now, worker)
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
setWorker(worker, capacity, settled, not draining and not unreachable, nowUs, state)
return { drainRequested, settled, unreachable and 1 or 0, redis.call('ZCARD', heartbeatKey) }
