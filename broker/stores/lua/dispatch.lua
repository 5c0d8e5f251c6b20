-- dispatch.lua: mark a claim as sent, just before its adapter is called: compare-and-set on the
-- owner token, so a claim whose lease lapsed and was recovered or taken over is never marked.
--
-- KEYS[1]  the idempotency record (hash, see idem.lua)
-- ARGV[1]  the ticket's owner token
-- ARGV[2]  the proposal id (its ledger record says how the call ended)
--
-- Returns 1 when marked (the call may be sent), 0 when the claim is no longer ours (it must not).

local rec = redis.call('HMGET', KEYS[1], 's', 'o')
if rec[1] ~= 'p' or rec[2] ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'd', '1', 'x', ARGV[2])
return 1
