-- lookup.lua: what an idempotency key would answer, without claiming it (clock.lua and idem.lua
-- are prepended).
--
-- KEYS[1]  the idempotency record (hash, see idem.lua)
-- ARGV[1]  now (caller's clock, seconds, exact decimal)
-- ARGV[2]  fingerprint of the request
-- ARGV[3]  '1' when an abandoned dispatched claim is to be recovered from the ledger first
--
-- Returns:
--   {}                                   no live record
--   {'lapsed', ...}                      the claim lapsed and needs recovering first (idem.lua)
--   {'replay', response}                 completed, same fingerprint (msgpack StoredResponse)
--   {'conflict', kind, lease_until}      kind: reused | in_progress | outcome_unknown;
--                                        lease_until is '' unless in_progress
-- Writes only the lease-expiry housekeeping of idem_live (as MemoryStore.lookup does).

local key = KEYS[1]
local now = tonumber(ARGV[1])
local live = idem_live(key, now, ARGV[3] == '1')
if live and live[1] == 'lapsed' then
  return live
end
local verdict = idem_verdict(live, key, ARGV[2], true)
if verdict then
  return verdict
end
return {}
