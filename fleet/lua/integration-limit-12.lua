-- integration-limit: sets or removes one integration's limit in the cluster (what settle-12.lua
-- enforces from its next call on). The caller validated the spec (src/integration-limits.ts);
-- this script checks it again against the cluster's capacity, atomically, so that a refused
-- change writes nothing.
-- KEYS: see includes/ledger.lua
-- ARGV: 1 channel  2 integration  3 spec: 'max:<n>', 'share:<0..1>', 'off', each optionally followed by
--       ';rate:<starts per second>', or 'rate:<r>' alone, or '' (remove: the default applies)
-- Returns: { 'ok' } | { 'bad-spec' } | { 'above-capacity', capacity (the sum of the cluster's workers' max parallelism) }
--@include ledger
local integration, spec = ARGV[2], ARGV[3]
local field = integrationField(integration)
local count, waitUntil = readIntegration(redis.call('HGET', totalsKey, field))
if spec == '' then
  writeIntegration(field, count, waitUntil, false, 0)
  return { 'ok' }
end
local inFlight, rate = splitLimitSpec(spec)
if not rate and (not inFlight or string.find(spec, ';', 1, true)) then return { 'bad-spec' } end
if rate and not (rate >= 0.001 and rate <= 1000000) then return { 'bad-spec' } end
if inFlight and inFlight ~= 'off' then
  local max = string.match(inFlight, '^max:(%d+)$')
  local share = string.match(inFlight, '^share:([%d.]+)$')
  if max then
    local capacity = tonumber(redis.call('HGET', totalsKey, 'capacity') or '0')
    -- A cluster with no workers yet has no capacity to compare with: any count is accepted.
    if capacity > 0 and tonumber(max) > capacity then return { 'above-capacity', capacity } end
  elseif not (share and tonumber(share) and tonumber(share) > 0 and tonumber(share) <= 1) then
    return { 'bad-spec' }
  end
end
writeIntegration(field, count, waitUntil, spec, 0)
return { 'ok' }
