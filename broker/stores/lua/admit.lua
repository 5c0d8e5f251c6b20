-- admit.lua: one atomic admission: idempotency claim, budget reservations and rate-limit hits,
-- all taken or none (clock.lua and idem.lua are prepended). Every check runs before the first
-- write, so an OOM refusal (which Redis raises on a script's first write) leaves nothing behind.
--
-- KEYS[1]            the idempotency record (hash), present only when argv[3] == '1'
-- next n_charges     one budget counter (string, integer) per charge, for the current window
-- next n_hits        one sliding-log ZSET per rate-limit hit
--
-- ARGV[1]  a msgpack array of strings (one argument to pack instead of a dozen; see
--          redis_scripts.packed), read into argv; argv[i] is:
--
-- argv[1]  now (caller's clock, seconds, exact decimal)
-- argv[2]  '1' dry run: evaluate only (no claim, no reservation, no hit, never a replay)
-- argv[3]  '1' when there is a claim
-- argv[4]  fingerprint
-- argv[5]  owner token for the new claim (random, from the caller)
-- argv[6]  lease_s: the claim holds until now + lease_s (its record lives at least a second)
-- argv[7]  '1' when the tool is idempotent (else an abandoned claim is kept UNKNOWN_HOLD_S more)
-- argv[8]  n_charges
-- argv[9]  n_hits
-- argv[10] '1' when an abandoned dispatched claim is to be recovered from the ledger first
-- then 3 per charge: amount, limit, end of the window (caller's clock, seconds)
-- then 3 per hit:    window_s (entries at or below now - window_s are out), limit,
--                    member (unique)
--
-- Returns:
--   {'lapsed', ...}                      the key's claim lapsed and needs recovering first
--                                        (idem.lua); nothing was taken
--   {'admitted', used...}                each budget's units used after this charge (none on a
--                                        dry run); the claim, if any, is ARGV[5]'s
--   {'replay', response}                 msgpack StoredResponse
--   {'conflict', kind, lease_until}      kind: reused | in_progress | outcome_unknown
--   {'budget', i}                        charge i (1-based) would exceed its limit
--   {'rate', i, oldest}                  hit i is over its limit; oldest is the score of the
--                                        entry that has to leave the window first

local argv = cmsgpack.unpack(ARGV[1])
local now = tonumber(argv[1])
local dry_run = argv[2] == '1'
local has_claim = argv[3] == '1'
local n_charges = tonumber(argv[8])
local n_hits = tonumber(argv[9])
local k0 = has_claim and 1 or 0
local a0 = 10

if has_claim then
  local live = idem_live(KEYS[1], now, argv[10] == '1')
  if live and live[1] == 'lapsed' then
    return live
  end
  local verdict = idem_verdict(live, KEYS[1], argv[4], not dry_run)
  if verdict then
    return verdict
  end
end

for i = 1, n_charges do
  local used = tonumber(redis.call('GET', KEYS[k0 + i]) or '0')
  local a = a0 + (i - 1) * 3
  if used + tonumber(argv[a + 1]) > tonumber(argv[a + 2]) then
    return {'budget', i}
  end
end

-- The sliding window of hit i: entries scored at or below its cutoff have left it.
local h0 = a0 + n_charges * 3
local cutoffs = {}
for i = 1, n_hits do
  local key = KEYS[k0 + n_charges + i]
  local a = h0 + (i - 1) * 3
  local limit = tonumber(argv[a + 2])
  cutoffs[i] = exact(now - tonumber(argv[a + 1]))
  if redis.call('ZCOUNT', key, '(' .. cutoffs[i], '+inf') >= limit then
    local oldest = redis.call('ZRANGE', key, -limit, -limit, 'WITHSCORES')
    return {'rate', i, oldest[2]}
  end
end

if dry_run then
  return {'admitted'}
end

-- Everything passed: take it all.
local used = {}
for i = 1, n_charges do
  local key = KEYS[k0 + i]
  local a = a0 + (i - 1) * 3
  used[i] = redis.call('INCRBY', key, argv[a + 1])
  redis.call('PEXPIRE', key, expire_ms(tonumber(argv[a + 3]) - now))
end
for i = 1, n_hits do
  local key = KEYS[k0 + n_charges + i]
  local a = h0 + (i - 1) * 3
  redis.call('ZREMRANGEBYSCORE', key, '-inf', cutoffs[i])
  redis.call('ZADD', key, argv[1], argv[a + 3])
  redis.call('PEXPIRE', key, expire_ms(tonumber(argv[a + 1])))
end
if has_claim then
  local lease_s = tonumber(argv[6])
  local lease_until = now + lease_s
  local expires_at = lease_until
  local ttl_s = lease_s
  if lease_s < 1 then
    expires_at = now + 1
    ttl_s = 1
  end
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 's', 'p', 'f', argv[4], 'i', argv[7], 'o', argv[5],
    'l', exact(lease_until), 'e', exact(expires_at), 'd', '0')
  if n_charges > 0 then -- what a claim never dispatched gives back (recover.lua)
    local charges = {}
    for i = 1, n_charges do
      charges[#charges + 1] = KEYS[k0 + i]
      charges[#charges + 1] = argv[a0 + (i - 1) * 3 + 1]
    end
    redis.call('HSET', KEYS[1], 'b', cmsgpack.pack(charges))
  end
  -- A claim of a non-idempotent tool has no TTL: abandoned mid-call, it must say
  -- outcome_unknown whenever it is next asked, until resolved (settle sets the TTL).
  if argv[7] == '1' then
    redis.call('PEXPIRE', KEYS[1], expire_ms(ttl_s))
  end
end
return {'admitted', unpack(used)}
