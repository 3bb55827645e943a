-- override-change: changes the rollback override and announces it. The version only grows,
-- even after Redis lost the key (it is at least Redis's clock in microseconds), so a balancer
-- holding an older version always takes the new one.
-- KEYS: 1 override (STRING, JSON {version, all, integrations, updatedAtUnixMs, actor})
-- ARGV: 1 changed channel  2 operation: rollback-all | resume-all | rollback | resume | set
--       3 integration (rollback, resume) or JSON {all, integrations} (set)  4 actor
-- Returns: { the new override, the previous one or '' }, as JSON.
local time = redis.call('TIME')
local nowUs = tonumber(time[1]) * 1000000 + tonumber(time[2])
local current = redis.call('GET', KEYS[1])
local state = { version = 0, all = false, integrations = {} }
if current then state = cjson.decode(current) end

local operation, argument = ARGV[2], ARGV[3]
local integrations = {}
local function without(name)
  local kept = {}
  for _, existing in ipairs(state.integrations) do
    if existing ~= name then table.insert(kept, existing) end
  end
  return kept
end
if operation == 'rollback-all' then
  state.all = true
  integrations = state.integrations
elseif operation == 'resume-all' then
  state.all = false
  integrations = state.integrations
elseif operation == 'rollback' then
  integrations = without(argument)
  table.insert(integrations, argument)
elseif operation == 'resume' then
  integrations = without(argument)
elseif operation == 'set' then
  local wanted = cjson.decode(argument)
  state.all = wanted.all
  integrations = wanted.integrations
else
  return redis.error_reply('unknown override operation ' .. tostring(operation))
end
table.sort(integrations)

-- Written by hand: cjson keeps only 14 significant digits of a number, and a version has 16.
local version = math.max(tonumber(state.version) + 1, nowUs)
local names = '[]'
if #integrations > 0 then names = cjson.encode(integrations) end
local encoded = '{"version":' .. string.format('%.0f', version) .. ',"all":' .. tostring(state.all == true) ..
  ',"integrations":' .. names .. ',"updatedAtUnixMs":' .. string.format('%.0f', math.floor(nowUs / 1000)) ..
  ',"actor":' .. cjson.encode(ARGV[4]) .. '}'
redis.call('SET', KEYS[1], encoded)
redis.call('PUBLISH', ARGV[1], encoded)
return { encoded, current or '' }
