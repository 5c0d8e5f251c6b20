-- tool_delete.lua: remove one registered tool; bump and announce the catalog version if it existed.
-- KEYS as in tool_put.lua; ARGV[1] name, ARGV[2] channel. Returns the new version, or 0.
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
if removed == 0 then
  return 0
end
local version = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[2], version)
return version
