-- Takes a single-node lock if it is free, and issues the next fencing token in
-- the same atomic step.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence` (same hash tag, same slot)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL in milliseconds
--
-- Reply:
--   {1, token}  acquired; token is the counter after INCR (>= 1)
--   {0, pttl}   held by someone (this owner included): the holder's remaining
--               TTL in milliseconds, or -1 if the key has no expiry
--
-- The counter never expires: it must outlive every lease to stay monotonic.
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
