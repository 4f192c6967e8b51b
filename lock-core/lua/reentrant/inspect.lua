-- Reads a reentrant lock's state without changing it.
--
-- KEYS[1]  the lock key (a hash)
-- KEYS[2]  the fencing counter
-- KEYS[3]  (optional) the holder information
--
-- Reply: {pttl, counter, holds, owners, holder}
--   pttl     remaining TTL in ms; -2 when free, -1 when the key has no expiry
--   counter  the last fencing token issued, as a string, or nil
--   holds    the holder's count, as a string, or nil when free
--   owners   how many owners the hash names (1 when held; more means corruption)
--   holder   the holder information as field, value, ... (see lock/inspect.lua);
--            empty when there is none
-- A KEYS[1] that is not a hash makes HVALS fail with WRONGTYPE.
local counts = redis.call('hvals', KEYS[1])
local holder = {}
if KEYS[3] and redis.call('type', KEYS[3])['ok'] == 'hash' then
  holder = redis.call('hgetall', KEYS[3])
end
return {redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]), counts[1] or false, #counts, holder}
