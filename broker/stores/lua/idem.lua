-- idem.lua: the idempotency-record helpers shared by admit.lua and lookup.lua. It is not run on
-- its own: the loader (broker/stores/redis.py) prepends it to those two scripts, after clock.lua.
--
-- KEYS: none of its own; idem_live() is handed the record key by its caller.
-- ARGV: none of its own; ``now`` is the caller's ARGV[1], read with tonumber() (see clock.lua).
-- Returns: idem_live(key, now, consult) -> nil (no live record), {state, fp, lease}, or
--          {'lapsed', owner, dispatched, charges, proposal_id} for a claim past its lease that
--          this script cannot complete alone (left untouched: the caller recovers it with
--          recover.lua, then calls again): one never dispatched that holds budget charges
--          (their counters are keys this script was not given), or, when ``consult`` is true,
--          one dispatched by a proposal whose ledger record may say how it ended.
--
-- The record is a hash:
--   s  state: 'p' in_progress, 'c' completed, 'u' outcome_unknown
--   f  fingerprint of tool and args
--   i  '1' when the tool is idempotent (an abandoned claim may be re-claimed)
--   o  owner token (in_progress only)
--   l  lease_until, caller's clock (seconds)
--   e  expires_at, caller's clock (seconds); the key's PEXPIRE is only garbage collection
--   r  stored response, msgpack (completed only)
--   d  '0' until dispatched (dispatch.lua), then '1'; absent on a claim written before the mark
--      existed, which may have been sent
--   x  the proposal that dispatched the claim (its ledger record)
--   b  the claim's budget charges, msgpack {counter key, amount, ...} (refunded if undispatched)

-- Mirrors MemoryStore._live_record: drop an expired completed record, and resolve an expired
-- lease (never dispatched or idempotent: gone, re-claimable; otherwise: outcome_unknown, kept
-- until resolved).
local function idem_live(key, now, consult)
  local r = redis.call('HMGET', key, 's', 'f', 'i', 'l', 'e', 'd', 'b', 'x', 'o')
  local st = r[1]
  if not st then
    return nil
  end
  if st == 'c' and tonumber(r[5]) <= now then -- an unknown outcome never expires
    redis.call('DEL', key)
    return nil
  end
  if st == 'p' and tonumber(r[4]) <= now then
    local dispatched = r[6] ~= '0'
    if (not dispatched and r[7]) or (dispatched and consult and r[8]) then
      return {'lapsed', r[9] or '', dispatched and '1' or '0', r[7] or '', r[8] or ''}
    end
    if not dispatched or r[3] == '1' then
      redis.call('DEL', key)
      return nil
    end
    -- Abandoned mid-call: it may have reached the backend. Never run it blindly again.
    local exp = r[5]
    local hold_exp = now + UNKNOWN_HOLD_S
    if hold_exp > tonumber(exp) then
      exp = exact(hold_exp)
    end
    redis.call('HSET', key, 's', 'u', 'e', exp)
    redis.call('HDEL', key, 'o')
    redis.call('PERSIST', key) -- kept until resolved (resolve.lua)
    st = 'u'
  end
  return {st, r[2], r[4]}
end

-- Mirrors MemoryStore._verdict. Returns nil (go on) or a reply table for the caller to return.
local function idem_verdict(live, key, fingerprint, replay)
  if not live then
    return nil
  end
  if live[2] ~= fingerprint then
    return {'conflict', 'reused', ''}
  end
  if live[1] == 'p' then
    return {'conflict', 'in_progress', live[3]}
  end
  if live[1] == 'u' then
    return {'conflict', 'outcome_unknown', ''}
  end
  if not replay then
    return nil -- a dry run never replays, and never satisfies a later real run
  end
  return {'replay', redis.call('HGET', key, 'r')}
end
