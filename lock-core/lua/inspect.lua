-- Reads a lock's state without changing it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  (optional) the holder information; shown only while it is bound
--          to the value the (string) lock key holds, when it names one
--
-- Reply: {pttl, counter, holder}
--   pttl     remaining TTL in milliseconds; -2 when the key does not exist,
--            -1 when it exists without an expiry
--   counter  the last fencing token issued, as a string, or nil if none yet
--   holder   the holder information as field, value, field, value ... (the
--            fields of grant.lua's write_holder); empty when there is none,
--            or when the key is not a hash
local holder = {}
if KEYS[3] and redis.call('type', KEYS[3])['ok'] == 'hash' then
  holder = redis.call('hgetall', KEYS[3])
  local bound = redis.call('hget', KEYS[3], 'hold')
  if bound then
    -- pcall: a lock key of another type is no string value to bind to.
    local value = redis.pcall('get', KEYS[1])
    if type(value) ~= 'string' or redis.sha1hex(value) ~= bound then
      -- An earlier hold's, left behind: not this lock's holder.
      holder = {}
    end
  end
end
return {redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]), holder}
