-- complete.lua: resolve one claim whose lease lapsed, as the next admit or lookup of its key
-- would (clock.lua and idem.lua are prepended): an idempotent tool's claim is released, any
-- other becomes outcome_unknown. Run by the completer (broker/completer.py) on every idempotency
-- record it finds, so that a stuck claim is resolved without waiting for a retry of its key.
--
-- KEYS[1]  the idempotency record (hash)
-- ARGV[1]  now (caller's clock, seconds, exact decimal)
-- ARGV[2]  '1' when an abandoned dispatched claim is to be recovered from the ledger first
--
-- Returns 'released', 'unknown', '' (not a claim in progress past its lease: untouched), or
-- {'lapsed', ...}: the claim needs recovering by the caller (idem.lua, recover.lua).

local key = KEYS[1]
local now = tonumber(ARGV[1])
local r = redis.call('HMGET', key, 's', 'l')
if r[1] ~= 'p' or tonumber(r[2]) > now then
  return ''
end
local live = idem_live(key, now, ARGV[2] == '1')
if not live then
  return 'released'
end
if live[1] == 'lapsed' then
  return live
end
return 'unknown'
