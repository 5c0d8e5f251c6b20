-- resolve.lua: end an outcome_unknown idempotency record (clock.lua and idem.lua are prepended).
--
-- KEYS[1]  the idempotency record (hash, see idem.lua)
-- ARGV[1]  a msgpack array of strings: now, fingerprint, resolution (succeeded | failed |
--          not_executed), ttl_s, and '1' when an abandoned dispatched claim is to be recovered
--          from the ledger first
-- ARGV[2]  the response to replay (msgpack StoredResponse; '' for not_executed)
--
-- Returns resolved | absent | reused | in_progress | settled (only 'resolved' changed anything),
-- or {'lapsed', ...}: the claim lapsed and needs recovering first (idem.lua).
-- Mirrors MemoryStore.resolve.

local argv = cmsgpack.unpack(ARGV[1])
local now = tonumber(argv[1])
local live = idem_live(KEYS[1], now, argv[5] == '1')
if live and live[1] == 'lapsed' then
  return live
end
if not live then
  return 'absent'
end
if live[2] ~= argv[2] then
  return 'reused'
end
if live[1] == 'p' then
  return 'in_progress'
end
if live[1] == 'c' then
  return 'settled'
end
if argv[3] == 'not_executed' then
  redis.call('DEL', KEYS[1])
  return 'resolved'
end
local ttl_s = tonumber(argv[4])
redis.call('HSET', KEYS[1], 's', 'c', 'r', ARGV[2], 'e', exact(now + ttl_s))
redis.call('PEXPIRE', KEYS[1], expire_ms(ttl_s))
return 'resolved'
