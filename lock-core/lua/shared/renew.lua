-- Prepended to lock/extend.lua, lock/extend_many.lua and lock/release.lua when they are
-- loaded: `holds`, and one
-- renewal of one hold (compare-and-extend).
--
-- renew(lock, counter, holder, value, ttl): when the lock key `lock` holds
-- `value` (see `holds`), sets its TTL to `ttl` ms from now,
-- gives the fencing counter `counter` (if passed, and if it has a TTL) at
-- least that TTL, so it never expires under the lease it fences, and the
-- holder information `holder` (if passed) the same TTL; returns 1. Returns 0,
-- changing nothing, when the key is gone or holds another value (a later
-- hold of the same owner included), or another kind's hold (`lock_value`).
-- lock_value(key): the lock key's value, or false when it is gone or holds
-- another kind's hold of the name (a reentrant lock's hash, a sorted set of
-- permits or of a read-write lock's holds), which is no hold of a lock's.
-- A key of a type no kind uses (a list, a set) is not a hold: GET's
-- WRONGTYPE is raised again, as is any other error.
-- holds(stored, value): whether the lock key's value `stored` (false when
-- the key is gone) is the hold `value`: the same text; or, for a value sent
-- without a token (`<owner>:<nonce>`, ending in the nonce's 16 hex digits:
-- an attempt whose reply was lost, or a fencing-off hold), that text with
-- `#<digits>` behind it (a fenced grant stores its token there) and nothing
-- else. A value sent with its token (`<owner>:<nonce>#<token>`) matches
-- only itself: a claim of another token names no hold.
local nonce_end = ':' .. string.rep('%x', 16)

local function holds(stored, value)
  if stored == value then
    return true
  end
  if stored == false then
    return false
  end
  return #stored > #value + 1
    and string.find(value, nonce_end .. '$') ~= nil
    and string.sub(stored, 1, #value + 1) == value .. '#'
    and string.find(stored, '^%d+$', #value + 2) ~= nil
end

local function lock_value(key)
  local ok, value = pcall(redis.call, 'get', key)
  if ok then
    return value
  end
  local message = tostring(type(value) == 'table' and value.err or value)
  if string.find(message, 'WRONGTYPE', 1, true) then
    local kind = redis.call('type', key)['ok']
    if kind == 'hash' or kind == 'zset' then
      return false
    end
  end
  -- Unprotected, so that the error is the server's own, as Redis words it.
  return redis.call('get', key)
end

local function renew(lock, counter, holder, value, ttl)
  if not holds(lock_value(lock), value) then
    return 0
  end
  redis.call('pexpire', lock, ttl)
  if counter then
    local left = redis.call('pttl', counter)
    if left > 0 and left < tonumber(ttl) then
      redis.call('pexpire', counter, ttl)
    end
  end
  if holder then
    redis.call('pexpire', holder, ttl)
  end
  return 1
end
