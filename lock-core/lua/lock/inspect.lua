-- Reads a lock's state without changing it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  (optional) the holder information; shown only while it is bound
--          to the value the (string) lock key holds
--
-- Reply: {pttl, counter, holder}
--   pttl     remaining TTL in milliseconds; -2 when the key does not exist,
--            -1 when it exists without an expiry
--   counter  the holder's fencing token when the lock key's value names it
--            (`#<token>` behind the hold), else the last token issued (at or
--            above the holder's), as a string; nil if none yet
--   holder   the holder information as field, value, field, value ... (the
--            fields of shared/grant.lua's write_holder); empty when there is none,
--            or when the key is not a hash
-- pcall: a lock key of another type is no string value.
local stored = redis.pcall('get', KEYS[1])
local holder = {}
if KEYS[3] and redis.call('type', KEYS[3])['ok'] == 'hash' then
  -- Only this hold's: bound to the value the lock key holds (every grant
  -- that writes holder information binds it). A hash left by an earlier
  -- hold, or by no grant at all, is nobody's: a grant without `holder_info`
  -- neither writes nor deletes one.
  if type(stored) == 'string' and redis.call('hget', KEYS[3], 'hold') == redis.sha1hex(stored) then
    holder = redis.call('hgetall', KEYS[3])
  end
end
-- The hold's own token, which every fenced grant stores behind its value;
-- else (a fencing-off hold, or no hold) the counter's: the last token issued.
local token = type(stored) == 'string' and string.match(stored, '#(%d+)$')
return {redis.call('pttl', KEYS[1]), token or redis.call('get', KEYS[2]), holder}
