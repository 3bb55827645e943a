-- autopilot-lease: takes or renews the lease that lets one control plane's autopilot act.
-- KEYS: 1 lease (STRING "<fence>:<owner>", with an expiry)  2 fence (STRING counter)
-- ARGV: 1 owner (unique per control-plane process)  2 lease ms
-- Returns the holder's fencing token when `owner` holds the lease now (taken or renewed), else 0.
-- A new holder gets a higher token than any before it, so a write fenced with an older one fails.
local current = redis.call('GET', KEYS[1])
if current then
  local fence, owner = string.match(current, '^(%d+):(.*)$')
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(fence)
  end
  return 0
end
local fence = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], fence .. ':' .. ARGV[1], 'PX', ARGV[2])
return fence
