-- Proclaims an election's leader value: binds `value` to the term of the
-- hold that has the election's lock, and tells observers and campaigners.
--
-- KEYS[1]  the election's lock key (a single-node lock: a string holding
--          `<owner>:<nonce>#<token>`, the token being the leader's term)
-- KEYS[2]  the leader record, `<prefix>{<name>}:leader`: `<term>:<value>`,
--          kept without a TTL like the fencing counter (a record whose term
--          is not the lock's is no one's)
-- ARGV[1]  the hold's value, `<owner>:<nonce>` (shared/renew.lua's `holds`
--          matches it with or without the token behind it)
-- ARGV[2]  the value to proclaim (any bytes)
--
-- Reply: 1 when proclaimed; 0 when the hold does not have the lock, or has
-- no token (nothing written); {-1, detail} when a key holds another type
-- (nothing written). A proclamation is published on `KEYS[1]:released` (a
-- `pcall`: a user without channels still proclaims), where observers and
-- waiting campaigners listen. `holds` comes from shared/renew.lua and
-- `election_foreign` from election/state.lua, loaded in front of this file.
if #KEYS < 2 or not ARGV[2] then
  return redis.error_reply('ERR election_proclaim: two keys, a hold and a value expected')
end
local foreign = election_foreign({KEYS[1], KEYS[2]})
if foreign then
  return foreign
end
local stored = redis.call('get', KEYS[1])
if not holds(stored, ARGV[1]) then
  return 0
end
local term = string.match(stored, '#(%d+)$')
if not term then
  return 0
end
redis.call('set', KEYS[2], term .. ':' .. ARGV[2])
redis.pcall('publish', KEYS[1] .. ':released', '0')
return 1
