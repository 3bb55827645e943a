-- last-rollback-update: replaces the last rollback's record with the same rollback's durable
-- outcome, unless a newer rollback has taken its place meanwhile.
-- KEYS: 1 last-rollback
-- ARGV: 1 the record JSON, 2 its override version
-- Returns 1 when replaced, 0 when the key holds another rollback (or none).
local lastRollbackKey = KEYS[1]
local current = redis.call('GET', lastRollbackKey)
if current and cjson.decode(current).overrideVersion == tonumber(ARGV[2]) then
  redis.call('SET', lastRollbackKey, ARGV[1])
  return 1
end
return 0
