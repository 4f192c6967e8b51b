-- Takes a fair semaphore's waiter out of the line (it gave up waiting, or
-- its future was dropped), with its offer, and gives back a permit a
-- release granted meanwhile (sem_hand_off in semaphore/common.lua) to an id it
-- will never take up.
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries (a hash)
-- KEYS[3]  the limit
-- KEYS[4]  the slots' fencing counters
-- KEYS[5]  the waiter queue
-- KEYS[6]  the waiters' deadlines
-- KEYS[7]  the waiters' offers
-- ARGV[1]  the owner (the waiter's place)
-- ARGV[2..]  the permit ids the waiter may have offered: its answered
--          attempt's, and those of attempts still in flight or whose
--          replies were lost
--
-- Reply: {removed, released}: the queue entries removed (0 or 1), and 1
-- when a permit granted to one of the ids was given back, else 0;
-- {-2, key, type} when a key holds another type (nothing was written).
-- What that frees goes to the next waiters' offers that fit; the rest is
-- published, as a release's is, and a waiter that only left publishes '0'
-- so the next in line tries at once.
if #KEYS < 7 or not ARGV[1] then
  return redis.error_reply('ERR semaphore_give_up: seven keys and an owner expected')
end
local permits, held, limit_key, fences = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local queue, waiters, offers = KEYS[5], KEYS[6], KEYS[7]
local owner = ARGV[1]
if sem_held_by_other(permits, held) then
  return sem_leave_beside_other(permits, queue, waiters, offers, owner)
end
local foreign = sem_foreign({permits, held, limit_key, fences, queue, waiters, offers},
  {'zset', 'hash', 'string', 'hash', 'list', 'zset', 'hash'})
if foreign then
  return foreign
end
local now, freed = sem_open(permits, held)
local released = 0
for index = 2, #ARGV do
  local id = ARGV[index]
  if line_owner(id) == owner and redis.call('zscore', permits, id) then
    freed = freed + (sem_entry(redis.call('hget', held, id)) or 0)
    sem_drop(permits, held, {id})
    released = 1
  end
end
sem_keep(permits, held, now)
redis.call('hdel', offers, owner)
redis.call('zrem', waiters, owner)
local removed = redis.call('lrem', queue, 0, owner)
local granted, stalled = sem_hand_off(permits, held, limit_key, fences, queue, waiters, offers, now)
if freed > granted then
  redis.pcall('publish', permits .. ':released', freed - granted)
elseif stalled or (removed > 0 and granted == 0) then
  redis.pcall('publish', permits .. ':released', 0)
end
return {removed, released}
