-- Prepended to the scripts that read a lock's state.
--
-- lock_state(lock, counter, holder): a lock's state, without changing it, as
-- {pttl, counter, holder}:
--   pttl     remaining TTL in milliseconds; -2 when the key does not exist,
--            -1 when it exists without an expiry
--   counter  the holder's fencing token when the lock key's value names it
--            (`#<token>` behind the hold), else the last token issued (at or
--            above the holder's), as a string; false if none yet
--   holder   the holder information as field, value, field, value ... (the
--            fields of shared/grant.lua's write_holder); empty when there is
--            none, or when the key is not a hash
-- `holder` is the key of the holder information, or nil when it is not read:
-- it is shown only while it is bound to the value the (string) lock key holds.
local function lock_state(lock, counter, holder)
  -- pcall: a lock key of another type is no string value.
  local stored = redis.pcall('get', lock)
  local info = {}
  if holder and redis.call('type', holder)['ok'] == 'hash' then
    -- Only this hold's: bound to the value the lock key holds (every grant
    -- that writes holder information binds it). A hash left by an earlier
    -- hold, or by no grant at all, is nobody's: a grant without `holder_info`
    -- neither writes nor deletes one.
    if type(stored) == 'string' and redis.call('hget', holder, 'hold') == redis.sha1hex(stored) then
      info = redis.call('hgetall', holder)
    end
  end
  -- The hold's own token, which every fenced grant stores behind its value;
  -- else (a fencing-off hold, or no hold) the counter's: the last token issued.
  local token = type(stored) == 'string' and string.match(stored, '#(%d+)$')
  return {redis.call('pttl', lock), token or redis.call('get', counter), info}
end
