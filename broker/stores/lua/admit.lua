-- admit.lua: one atomic admission: idempotency claim, budget reservations and rate-limit hits,
-- all taken or none (idem.lua is prepended). Every check runs before the first write, so an
-- OOM refusal (which Redis raises on a script's first write) leaves nothing behind.
--
-- KEYS[1]            the idempotency record (hash), present only when ARGV[3] == '1'
-- next n_charges     one budget counter (string, integer) per charge, for the current window
-- next n_hits        one sliding-log ZSET per rate-limit hit
--
-- ARGV[1]   now (caller's clock, seconds, exact decimal)
-- ARGV[2]   '1' dry run: evaluate only (no claim, no reservation, no hit, never a replay)
-- ARGV[3]   '1' when there is a claim
-- ARGV[4]   fingerprint
-- ARGV[5]   owner token for the new claim (random, from the caller)
-- ARGV[6]   lease_until
-- ARGV[7]   expires_at of the in_progress record
-- ARGV[8]   '1' when the tool is idempotent
-- ARGV[9]   TTL (ms) of the in_progress record
-- ARGV[10]  hold_exp: now + the outcome_unknown hold
-- ARGV[11]  hold_ms: the same hold in milliseconds
-- ARGV[12]  n_charges
-- ARGV[13]  n_hits
-- then 3 per charge: amount, limit, counter TTL (ms: to the end of the window, plus a margin)
-- then 4 per hit:    cutoff (now - window_s: entries at or below it are out), limit,
--                    member (unique), ZSET TTL (ms: window_s plus a margin)
--
-- Returns:
--   {'admitted', owner, used...}         owner is '' without a claim or on a dry run; then
--                                        each budget's units used after this charge
--   {'replay', response}                 msgpack StoredResponse
--   {'conflict', kind, lease_until}      kind: reused | in_progress | outcome_unknown
--   {'budget', i}                        charge i (1-based) would exceed its limit
--   {'rate', i, oldest}                  hit i is over its limit; oldest is the score of the
--                                        entry that has to leave the window first

local now = tonumber(ARGV[1])
local dry_run = ARGV[2] == '1'
local has_claim = ARGV[3] == '1'
local n_charges = tonumber(ARGV[12])
local n_hits = tonumber(ARGV[13])
local k0 = has_claim and 1 or 0
local a0 = 13

if has_claim then
  local live = idem_live(KEYS[1], now, ARGV[10], ARGV[11])
  local verdict = idem_verdict(live, KEYS[1], ARGV[4], not dry_run)
  if verdict then
    return verdict
  end
end

for i = 1, n_charges do
  local used = tonumber(redis.call('GET', KEYS[k0 + i]) or '0')
  local a = a0 + (i - 1) * 3
  if used + tonumber(ARGV[a + 1]) > tonumber(ARGV[a + 2]) then
    return {'budget', i}
  end
end

local h0 = a0 + n_charges * 3
for i = 1, n_hits do
  local key = KEYS[k0 + n_charges + i]
  local a = h0 + (i - 1) * 4
  local limit = tonumber(ARGV[a + 2])
  if redis.call('ZCOUNT', key, '(' .. ARGV[a + 1], '+inf') >= limit then
    local oldest = redis.call('ZRANGE', key, -limit, -limit, 'WITHSCORES')
    return {'rate', i, oldest[2]}
  end
end

if dry_run then
  return {'admitted', ''}
end

-- Everything passed: take it all.
local used = {}
for i = 1, n_charges do
  local key = KEYS[k0 + i]
  local a = a0 + (i - 1) * 3
  used[i] = redis.call('INCRBY', key, ARGV[a + 1])
  redis.call('PEXPIRE', key, ARGV[a + 3])
end
for i = 1, n_hits do
  local key = KEYS[k0 + n_charges + i]
  local a = h0 + (i - 1) * 4
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[a + 1])
  redis.call('ZADD', key, ARGV[1], ARGV[a + 3])
  redis.call('PEXPIRE', key, ARGV[a + 4])
end
if has_claim then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 's', 'p', 'f', ARGV[4], 'i', ARGV[8], 'o', ARGV[5],
    'l', ARGV[6], 'e', ARGV[7])
  redis.call('PEXPIRE', KEYS[1], ARGV[9])
  return {'admitted', ARGV[5], unpack(used)}
end
return {'admitted', '', unpack(used)}
