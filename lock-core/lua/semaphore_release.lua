-- Gives back one permit, if it is still live, and tells waiters how much
-- weight is free now.
--
-- KEYS[1]  the permits (a sorted set; see semaphore.lua)
-- KEYS[2]  the held entries (a hash)
-- KEYS[3]  the limit (a string)
-- ARGV[1]  the permit id
--
-- Reply: 1 when released; 0 when the permit was not live (a second
-- release, or one after it expired: nothing is credited); {-2, key,
-- detail} when a key holds something else (nothing written).
-- A release publishes the weight free after it (the stored limit less the
-- live permits' weight) on `KEYS[1]:released`, in the same atomic step, so
-- a waiter that needs more than one permit's worth can tell whether to try.
-- The publish is a `pcall`: a user without pub/sub channels still releases.
local permits, held, limit_key = KEYS[1], KEYS[2], KEYS[3]
local foreign = sem_foreign({permits, held, limit_key}, {'zset', 'hash', 'string'})
if foreign then
  return foreign
end
local now = sem_now()
local live, used = sem_read(permits, held, now)
if not live then
  return used
end
local mine = live[ARGV[1]]
if not mine then
  return 0
end
redis.call('zrem', permits, ARGV[1])
redis.call('hdel', held, ARGV[1])
sem_keep(permits, held, now)
local limit = tonumber(redis.call('get', limit_key)) or 0
redis.pcall('publish', permits .. ':released', math.max(limit - used + mine.weight, 0))
return 1
