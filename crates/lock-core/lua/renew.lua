-- Prepended to extend.lua and extend_many.lua when they are loaded: one
-- renewal of one hold (compare-and-extend).
--
-- renew(lock, counter, holder, value, ttl): when the lock key `lock` holds
-- `value` (the hold's `<owner>:<nonce>`), sets its TTL to `ttl` ms from now,
-- gives the fencing counter `counter` (if passed, and if it has a TTL) at
-- least that TTL, so it never expires under the lease it fences, and the
-- holder information `holder` (if passed) the same TTL; returns 1. Returns 0,
-- changing nothing, when the key is gone or holds another value (a later
-- hold of the same owner included). A key of another type (not a string)
-- makes GET raise WRONGTYPE.
local function renew(lock, counter, holder, value, ttl)
  if redis.call('get', lock) ~= value then
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
