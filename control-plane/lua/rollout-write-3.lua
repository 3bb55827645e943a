-- rollout-write: replaces the rollout if nobody wrote it since it was read (compare-and-set).
-- KEYS: 1 rollout (HASH json, version)  2 autopilot lease  3 history (LIST)
-- ARGV: 1 the version read (0: none yet)  2 the new JSON  3 the lease value the writer must
--       hold ("<fence>:<owner>"; "" for an operator's change through the API)
--       4 "finished" to also push the JSON on the history, else ""  5 history length kept
-- Returns the new version; -1 when the writer no longer holds the lease; -2 when the rollout
-- changed since it was read.
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then
  return -1
end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then
  return -2
end
redis.call('HSET', KEYS[1], 'version', version + 1, 'json', ARGV[2])
if ARGV[4] == 'finished' then
  redis.call('LPUSH', KEYS[3], ARGV[2])
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[5]) - 1)
end
return version + 1
