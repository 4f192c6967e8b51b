-- Takes a waiting writer out of a read-write lock's queue (it gave up
-- waiting, or its future was dropped), with its offer, and gives back a
-- write a release granted meanwhile (rw_hand_off in rw/common.lua) to a hold it
-- will never take up.
--
-- KEYS[1]  the holds (a sorted set; see rw/common.lua)
-- KEYS[2]  the modes (a hash)
-- KEYS[3]  the write counter
-- KEYS[4]  the waiting writers' queue
-- KEYS[5]  their deadlines
-- KEYS[6]  their offers
-- ARGV[1]  the owner (the writer's place)
-- ARGV[2..]  the hold ids the writer may have offered: its answered
--          attempt's, and those of attempts still in flight or whose
--          replies were lost
--
-- Reply: {removed, released}: the queue entries removed (0 or 1), and 1
-- when a write granted to one of the ids was given back, else 0;
-- {-2, key, type} when a key holds another type (nothing was written).
-- When that leaves the lock free, the write goes to the next writer's
-- offer (or a release is published); a writer that only left is published
-- ('0'), so readers it held back and the next writer try at once.
if #KEYS < 6 or not ARGV[1] then
  return redis.error_reply('ERR rw_give_up: six keys and an owner expected')
end
local holds, modes, counter, queue, waiters, offers = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local owner = ARGV[1]
if sem_held_by_other(holds, modes) then
  return sem_leave_beside_other(holds, queue, waiters, offers, owner)
end
local foreign = sem_foreign({holds, modes, counter, queue, waiters, offers},
  {'zset', 'hash', 'string', 'list', 'zset', 'hash'})
if foreign then
  return foreign
end
local now = sem_now()
local expired = redis.call('zrangebyscore', holds, '-inf', now)
sem_drop(holds, modes, expired)
local released = 0
for index = 2, #ARGV do
  local id = ARGV[index]
  if line_owner(id) == owner and redis.call('zscore', holds, id)
      and rw_entry(redis.call('hget', modes, id)) == 'w' then
    sem_drop(holds, modes, {id})
    released = 1
  end
end
sem_keep(holds, modes, now)
redis.call('hdel', offers, owner)
redis.call('zrem', waiters, owner)
local removed = redis.call('lrem', queue, 0, owner)
if released == 1 or removed > 0 or #expired > 0 then
  if not rw_hand_off(holds, modes, counter, queue, waiters, offers, now) then
    redis.pcall('publish', holds .. ':released', released == 1 and '1' or '0')
  end
end
return {removed, released}
