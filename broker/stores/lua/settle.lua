-- settle.lua: finish an admission. Refund its budget charges on a failure, then compare-and-set
-- the idempotency record on the owner token: complete it, release it or mark it outcome_unknown
-- (clock.lua is prepended).
--
-- KEYS[1]        the idempotency record (hash), present only when argv[2] == '1'
-- next n         the budget counters the ticket charged, each in the window it was taken in
-- then           the decision record's key, present only with ARGV[3] (a standalone Redis: on a
--                Cluster it lives in another slot, and the caller sets it apart)
-- last 4         with ARGV[4] only: the approvals' status, body, created and tenant keys
--                (redis_approvals.py), on a standalone Redis only, for the same reason
--
-- ARGV[1]  a msgpack array of strings (one argument to pack instead of several; see
--          redis_scripts.packed), read into argv:
--   argv[1]  settlement: succeeded | definite_failure | transient_failure | unknown
--   argv[2]  '1' when the ticket holds a claim
--   argv[3]  the ticket's owner token ('' if none)
--   argv[4]  now (caller's clock, seconds, exact decimal)
--   argv[5]  ttl_s: the settled record expires at now + ttl_s
--   argv[6]  n, the number of charges
--   then 1 per charge: amount
-- ARGV[2]  response to store (msgpack StoredResponse: bytes, which Redis' cmsgpack cannot read
--          inside the array)
-- ARGV[3]  optional: the decision record (msgpack DecisionRecord), stored under its key for
--          ttl_s whatever the settlement finds, as the reference store saves it unconditionally
-- ARGV[4..8] optional (with ARGV[3]): an approval to create first, as redis_approvals' create:
--          its id, status, body, created_at and tenant (a proposal answered 202 keeps its key
--          completed only together with the approval it waits for)
--
-- Returns 1 when settled (or there was no claim), 0 when the claim is no longer ours (then the
-- record is left untouched; refunds of the ticket's own charges still happen, as in MemoryStore).

local argv = cmsgpack.unpack(ARGV[1])
local settlement = argv[1]
local has_claim = argv[2] == '1'
local n = tonumber(argv[6])
local k0 = has_claim and 1 or 0

local last = #KEYS
if ARGV[4] then -- the first writes, so that a refusal leaves nothing behind
  local a = last - 3
  if redis.call('HEXISTS', KEYS[a], ARGV[4]) == 1 then
    return redis.error_reply('approval ' .. ARGV[4] .. ' exists already')
  end
  redis.call('ZADD', KEYS[a + 2], ARGV[7], ARGV[4])
  redis.call('HSET', KEYS[a + 3], ARGV[4], ARGV[8])
  redis.call('HSET', KEYS[a], ARGV[4], ARGV[5])
  redis.call('HSET', KEYS[a + 1], ARGV[4], ARGV[6])
  last = a - 1
end

if ARGV[3] then -- the first write, so that an OOM refusal leaves nothing behind
  redis.call('SET', KEYS[last], ARGV[3], 'PX', string.format('%d', tonumber(argv[5]) * 1000))
end

if settlement == 'definite_failure' or settlement == 'transient_failure' then
  for i = 1, n do
    local key = KEYS[k0 + i]
    local used = redis.call('GET', key)
    if used then -- a counter that already expired has nothing left to refund
      local left = tonumber(used) - tonumber(argv[6 + i])
      if left < 0 then
        left = 0
      end
      redis.call('SET', key, string.format('%d', left), 'KEEPTTL')
    end
  end
end

if not has_claim then
  return 1
end
local key = KEYS[1]
local rec = redis.call('HMGET', key, 's', 'o')
if rec[1] ~= 'p' or rec[2] ~= argv[3] then
  return 0 -- the lease expired and someone else owns the key now
end
if settlement == 'transient_failure' then
  redis.call('DEL', key)
  return 1
end
local ttl_s = tonumber(argv[5])
local expires_at = exact(tonumber(argv[4]) + ttl_s)
if settlement == 'unknown' then
  redis.call('HSET', key, 's', 'u', 'e', expires_at)
  redis.call('HDEL', key, 'o')
  redis.call('PERSIST', key) -- kept until resolved (resolve.lua): never re-run blindly
  return 1
end
redis.call('HSET', key, 's', 'c', 'r', ARGV[2], 'e', expires_at)
redis.call('HDEL', key, 'o')
redis.call('PEXPIRE', key, expire_ms(ttl_s))
return 1
