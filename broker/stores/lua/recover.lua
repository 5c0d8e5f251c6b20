-- recover.lua: complete one claim whose lease lapsed, as its caller decided after reading it
-- (idem.lua's 'lapsed' reply) and, for a dispatched one, its proposal's ledger record (clock.lua
-- is prepended). Compare-and-set on the owner token and the lapsed lease: a claim settled,
-- recovered or claimed again since is left untouched.
--
-- KEYS[1]  the idempotency record (hash, see idem.lua)
-- next n   the budget counters to refund (the record's charges; none unless refunded)
--
-- ARGV[1]  a msgpack array of strings, read into argv:
--   argv[1]  now (caller's clock, seconds, exact decimal)
--   argv[2]  the lapsed claim's owner token
--   argv[3]  action: release (never dispatched, or a recorded transient failure) | complete
--            (a recorded success or definite failure) | lapse (no record: an idempotent tool's
--            claim is released, any other becomes outcome_unknown)
--   argv[4]  ttl_s of a completed record
--   argv[5]  n, the number of refunds
--   then 1 per refund: amount
-- ARGV[2]  the response a completed record replays (msgpack StoredResponse; '' otherwise)
--
-- Returns 'released', 'unknown', 'settled', or '' (no longer that lapsed claim: untouched).

local argv = cmsgpack.unpack(ARGV[1])
local key = KEYS[1]
local now = tonumber(argv[1])
local rec = redis.call('HMGET', key, 's', 'o', 'l', 'i', 'e')
if rec[1] ~= 'p' or rec[2] ~= argv[2] or tonumber(rec[3]) > now then
  return ''
end
for i = 1, tonumber(argv[5]) do
  local counter = KEYS[1 + i]
  local used = redis.call('GET', counter)
  if used then -- a counter that already expired has nothing left to refund
    local left = tonumber(used) - tonumber(argv[5 + i])
    if left < 0 then
      left = 0
    end
    redis.call('SET', counter, string.format('%d', left), 'KEEPTTL')
  end
end
local action = argv[3]
if action == 'release' or (action == 'lapse' and rec[4] == '1') then
  redis.call('DEL', key)
  return 'released'
end
if action == 'complete' then
  local ttl_s = tonumber(argv[4])
  redis.call('HSET', key, 's', 'c', 'r', ARGV[2], 'e', exact(now + ttl_s))
  redis.call('HDEL', key, 'o', 'b')
  redis.call('PEXPIRE', key, expire_ms(ttl_s))
  return 'settled'
end
-- Abandoned mid-call, and nothing says how it ended: never run it blindly again.
local exp = rec[5]
local hold_exp = now + UNKNOWN_HOLD_S
if hold_exp > tonumber(exp) then
  exp = exact(hold_exp)
end
redis.call('HSET', key, 's', 'u', 'e', exp)
redis.call('HDEL', key, 'o', 'b')
redis.call('PERSIST', key)
return 'unknown'
