-- override-ack: records that a balancer applied an override version and tells the control plane.
-- KEYS: 1 acks (HASH balancerId -> JSON {version, ackedAtUnixMs})
-- ARGV: 1 acked channel  2 balancerId  3 version
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
-- By hand: cjson would round a 16-digit version.
local ack = '{"balancerId":' .. cjson.encode(ARGV[2]) .. ',"version":' .. string.format('%.0f', tonumber(ARGV[3])) ..
  ',"ackedAtUnixMs":' .. string.format('%.0f', now) .. '}'
redis.call('HSET', KEYS[1], ARGV[2], ack)
redis.call('PUBLISH', ARGV[1], ack)
return ack
