-- profile-lock-release: frees the CPU-profiling lock only if the caller still holds it
-- (it may have expired and been taken by another request meanwhile).
-- KEYS: 1 lock
-- ARGV: 1 the holder JSON the caller set
-- Returns 1 when freed, 0 when the caller no longer held it.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
