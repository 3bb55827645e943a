-- balancer-heartbeat: says a balancer is alive (the control plane waits for the acknowledgements
-- of live balancers only) and hands it the current override, so a missed message or a
-- reconnect is caught up within one heartbeat.
-- KEYS: 1 balancers (ZSET balancerId -> last heartbeat ms)  2 balancer-info (HASH balancerId -> JSON)
--       3 override (STRING)
-- ARGV: 1 balancerId  2 info JSON
-- Returns: the override JSON, or false when there is none.
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return redis.call('GET', KEYS[3])
