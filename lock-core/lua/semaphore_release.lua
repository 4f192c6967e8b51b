-- Gives back one permit, if it is still live, and tells waiters how much
-- weight that freed.
--
-- KEYS[1]  the permits (a sorted set; see semaphore.lua)
-- KEYS[2]  the held entries (a hash)
-- ARGV[1]  the permit id
--
-- Reply: 1 when released; 0 when the permit was not live (a second
-- release, or one after it expired: nothing is credited); {-2, key,
-- detail} when a key holds another type (nothing written).
-- A release publishes the weight it freed (its own, and that of the expired
-- permits it dropped) on `KEYS[1]:released`, in the same atomic step, so a
-- waiter for more than that can go on waiting. The publish is a `pcall`: a
-- user without pub/sub channels still releases. Missing KEYS is an error
-- reply before anything is read. The cost is in the number of expired
-- permits.
if #KEYS < 2 then
  return redis.error_reply('ERR semaphore_release: two keys expected')
end
local permits, held = KEYS[1], KEYS[2]
if not ARGV[1] then
  return redis.error_reply('ERR semaphore_release: the permit id expected')
end
local now, freed = sem_open(permits, held)
if not now then
  return freed
end
if not redis.call('zscore', permits, ARGV[1]) then
  if freed > 0 then
    redis.pcall('publish', permits .. ':released', freed)
  end
  return 0
end
freed = freed + (sem_entry(redis.call('hget', held, ARGV[1])) or 0)
sem_drop(permits, held, {ARGV[1]})
sem_keep(permits, held, now)
redis.pcall('publish', permits .. ':released', freed)
return 1
