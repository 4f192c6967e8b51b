-- Takes a reentrant lock, or enters it again for the owner that holds it.
-- The lock is a hash: field = owner token, value = hold count.
--
-- KEYS[1]  the lock key (a hash), `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence` (same hash tag)
-- KEYS[3]  the holder information, `<prefix>{<name>}:holder` (same hash tag):
--          written by a first hold, kept by a re-entry (which moves its
--          expiry with the lock's)
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL in milliseconds. A first hold gets it; a re-entry only
--          lengthens the key to it, never shortens it: the outer holder
--          trusts the TTL it set.
-- ARGV[3..7]  what a first hold writes beside the lock (shared/grant.lua): the
--          counter's TTL (0: none) and the holder information. A re-entry
--          keeps the counter (and its token), lengthening a TTL it has to the
--          lock's.
--
-- Reply:
--   {1, token, holds}  acquired: a first hold gets the next fencing token (an
--                      integer below 2^53, else its decimal text; see
--                      shared/grant.lua), a re-entry gets the current one (the
--                      counter's decimal text); holds is the new count
--   {0, pttl}          held by another owner: its remaining TTL in ms (-1: none)
--   {-1, detail}       this owner's hold count is not a positive integer, or the
--                      fencing counter is missing, not a number or at its
--                      maximum, or the holder key is not a hash; nothing was
--                      changed
-- A KEYS[1] that exists but is not a hash is another kind's hold: {0, its
-- PTTL}, nothing written. A KEYS[2] that is not a string makes GET fail with
-- WRONGTYPE before any write.
-- counter_problem, next_token, counter_outlives, holder_problem and
-- write_holder come from shared/fencing_counter.lua and shared/grant.lua, loaded in front of
-- this file.
local ttl = tonumber(ARGV[2])

-- The free case first: it is the common one. The counter is checked before
-- the hash is written, so a counter INCR would refuse leaves nothing behind.
if redis.call('exists', KEYS[1]) == 0 then
  local counter = redis.call('get', KEYS[2])
  local problem = counter_problem(counter) or holder_problem(KEYS[3])
  if problem then
    return {-1, problem}
  end
  read_grant_time(3)
  redis.call('hset', KEYS[1], ARGV[1], 1)
  redis.call('pexpire', KEYS[1], ARGV[2])
  write_holder(KEYS[3], ARGV[2], 3)
  return {1, next_token(KEYS[2], counter, ttl, tonumber(ARGV[3]) or 0), 1}
end
-- Another kind's hold of the name (a lock's string, a read-write lock's or
-- semaphore's sorted set) is held, as another owner's hash is.
if redis.call('type', KEYS[1])['ok'] ~= 'hash' then
  return {0, redis.call('pttl', KEYS[1])}
end
local count = redis.call('hget', KEYS[1], ARGV[1])
if not count then
  return {0, redis.call('pttl', KEYS[1])}
end
local holds = tonumber(count)
if not holds or holds < 1 or holds ~= math.floor(holds) then
  return {-1, 'hold count ' .. count .. ' is not a positive integer'}
end
-- The counter as text: a Lua number would round tokens above 2^53.
local token = redis.call('get', KEYS[2])
if not token or token == '0' or counter_problem(token) then
  return {-1, 'the fencing counter is missing, not a positive integer, or at its maximum'}
end
redis.call('hincrby', KEYS[1], ARGV[1], 1)
if redis.call('pttl', KEYS[1]) < ttl then
  redis.call('pexpire', KEYS[1], ARGV[2])
  counter_outlives(KEYS[2], ttl)
  if KEYS[3] then
    redis.call('pexpire', KEYS[3], ARGV[2])
  end
end
return {1, token, holds + 1}
