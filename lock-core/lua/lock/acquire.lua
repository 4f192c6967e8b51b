-- Takes a single-node lock if it is free, and issues the next fencing token in
-- the same atomic step.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence` (same hash tag, same slot)
-- KEYS[3]  the holder information, `<prefix>{<name>}:holder` (same hash tag)
-- ARGV[1]  the hold's value, `<owner>:<nonce>` (unique to this attempt)
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3..7]  what the grant writes beside the lock (shared/grant.lua): the counter's
--          TTL (0: none) and the holder information
-- ARGV[8]  (optional) '0' to issue no fencing token (`fencing = false` with
--          `holder_info`): the counter is neither read nor written; absent or
--          anything else, a token is issued
--
-- The lock key gets ARGV[1] with `#<token>` behind it when a token is
-- issued, ARGV[1] alone when none is: the key records what its hold was
-- granted, so a hand-off token cannot claim another (lock/take_over.lua).
--
-- Reply:
--   {1, token}    acquired; token is the next fencing token (>= 1): the
--                 counter after INCR, or the server's time in µs (shared/grant.lua);
--                 an integer below 2^53, the counter's decimal text above
--   {1, 0}        acquired without a token (ARGV[8] == '0')
--   {0, pttl}     held by someone (this owner included): the holder's remaining
--                 TTL in milliseconds, or -1 if the key has no expiry
--   {-1, detail}  the fencing counter or the holder key holds foreign data;
--                 nothing was written
-- A counter of another type makes GET fail with WRONGTYPE, also before any write.
--
-- The counter is checked before the SET, so a counter INCR would refuse never
-- leaves a key behind. It outlives every lease: forever, or (with a counter
-- TTL) at least as long as the lock key. The holder information has the lock's
-- TTL.
-- counter_problem, next_token, holder_problem and write_holder come from
-- shared/fencing_counter.lua and shared/grant.lua, loaded in front of this file.
local fenced = ARGV[8] ~= '0'
local counter = false
if fenced then
  counter = redis.call('get', KEYS[2])
end
local problem = counter_problem(counter) or holder_problem(KEYS[3])
if problem then
  return {-1, problem}
end
read_grant_time(3)
local ttl = tonumber(ARGV[2])
local counter_ttl = tonumber(ARGV[3]) or 0
if redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end
if not fenced then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  write_holder(KEYS[3], ARGV[2], 3, ARGV[1])
  return {1, 0}
end
local token = next_token(KEYS[2], counter, ttl, counter_ttl)
local value = ARGV[1] .. '#' .. token_text(token)
redis.call('set', KEYS[1], value, 'PX', ARGV[2])
write_holder(KEYS[3], ARGV[2], 3, value)
return {1, token}
