-- limit-sample: adds one sample of integrations' limits to a time slot's hash. Every control
-- plane samples, so a figure is merged, never added: the peak of in flight and waiting (max of
-- the samples), the last limit seen, and the slot's latency and refusals as computed (the same
-- from every control plane). Writing one sample twice changes nothing.
-- KEYS: 1 the slot's hash (limitSeriesSlot)
-- ARGV: 1 the hash's time to live (ms), then triples: field, value, mode ('max' or 'set')
-- Returns the number of fields written.
local slotKey = KEYS[1]
local written = 0
for i = 2, #ARGV, 3 do
  local field, value, mode = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
  local current = tonumber(redis.call('HGET', slotKey, field))
  if mode == 'set' or current == nil or value > current then
    redis.call('HSET', slotKey, field, value)
    written = written + 1
  end
end
redis.call('PEXPIRE', slotKey, ARGV[1])
return written
