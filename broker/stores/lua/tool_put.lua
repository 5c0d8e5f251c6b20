-- tool_put.lua: register or replace one tool, bump the catalog version and announce it, atomically.
-- KEYS[1] tools hash (name -> record), KEYS[2] secrets hash (name -> signing secret),
-- KEYS[3] catalog version counter.
-- ARGV[1] name, ARGV[2] record, ARGV[3] signing secret, ARGV[4] "1" keeps an existing secret,
-- ARGV[5] the channel that carries catalog versions.
-- Returns {version, created (1|0), secret_kept (1|0)}.
local created = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local kept = 0
if ARGV[4] == '1' and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  kept = 1
else
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
end
local version = redis.call('INCR', KEYS[3])
redis.call('PUBLISH', ARGV[5], version)
return {version, created, kept}
