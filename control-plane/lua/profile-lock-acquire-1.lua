-- profile-lock-acquire: takes the fleet-wide CPU-profiling lock unless someone holds it.
-- KEYS: 1 lock (STRING: the holder's JSON, which carries a unique token)
-- ARGV: 1 holder JSON  2 ttl ms
-- Returns {1} when taken; else {0, the current holder's JSON, its ms left}.
local current = redis.call('GET', KEYS[1])
if current then
  return {0, current, redis.call('PTTL', KEYS[1])}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return {1}
