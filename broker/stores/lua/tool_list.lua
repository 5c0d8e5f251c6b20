-- tool_list.lua: every registered tool with its secret, and the catalog version they belong to, in one read.
-- KEYS as in tool_put.lua; ARGV[1] one name to read, or "" for all.
-- Returns {version, {name, record, secret, name, record, secret, ...}}.
local version = tonumber(redis.call('GET', KEYS[3]) or '0')
local out = {}
if ARGV[1] ~= '' then
  local record = redis.call('HGET', KEYS[1], ARGV[1])
  if record then
    out = {ARGV[1], record, redis.call('HGET', KEYS[2], ARGV[1]) or ''}
  end
  return {version, out}
end
local records = redis.call('HGETALL', KEYS[1])
for i = 1, #records, 2 do
  out[#out + 1] = records[i]
  out[#out + 1] = records[i + 1]
  out[#out + 1] = redis.call('HGET', KEYS[2], records[i]) or ''
end
return {version, out}
