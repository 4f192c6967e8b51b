-- Takes a single-node lock if it is free, and issues the next fencing token in
-- the same atomic step.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence` (same hash tag, same slot)
-- ARGV[1]  the hold's value, `<owner>:<nonce>` (unique to this attempt)
-- ARGV[2]  the TTL in milliseconds
--
-- Reply:
--   {1, token}    acquired; token is the counter after INCR (>= 1)
--   {0, pttl}     held by someone (this owner included): the holder's remaining
--                 TTL in milliseconds, or -1 if the key has no expiry
--   {-1, detail}  the fencing counter holds foreign data; nothing was written
-- A counter of another type makes GET fail with WRONGTYPE, also before any write.
--
-- The counter is checked before the SET, so a counter INCR would refuse never
-- leaves a key behind. It never expires: it must outlive every lease to stay
-- monotonic.
-- counter_problem comes from fencing_counter.lua, loaded in front of this file.
local counter = redis.call('get', KEYS[2])
local problem = counter_problem(counter)
if problem then
  return {-1, problem}
end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('incr', KEYS[2])}
end
return {0, redis.call('pttl', KEYS[1])}
