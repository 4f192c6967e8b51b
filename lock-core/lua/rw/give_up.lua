-- Takes a waiting writer out of a read-write lock's queue (it gave up
-- waiting, or its future was dropped), with its offer, and gives back a
-- write a release granted meanwhile (rw_hand_off in rw/common.lua) to a hold it
-- will never take up.
--
-- KEYS[1]  the holds (the lease set's sorted set; see rw/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the lease set's slots (a semaphore's; swept permits free theirs)
-- KEYS[4]  the write counter
-- KEYS[5]  the waiting writers' queue
-- KEYS[6]  their deadlines
-- KEYS[7]  their offers
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
if #KEYS < 7 or not ARGV[1] then
  return redis.error_reply('ERR rw_give_up: seven keys and an owner expected')
end
local holds, held, slots, counter = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local queue, waiters, offers = KEYS[5], KEYS[6], KEYS[7]
local owner = ARGV[1]
local now = ls_now()
local ids = {}
for index = 2, #ARGV do
  ids[#ids + 1] = ARGV[index]
end
local ls, in_way, problem = ls_open_as('rw', holds, held, slots, now, ids)
if problem then
  return problem
end
if in_way then
  -- Another kind's name: only the line is written.
  return sem_leave_beside_other(holds, queue, waiters, offers, owner)
end
local foreign = ls_foreign({counter, queue, waiters, offers}, {'string', 'list', 'zset', 'hash'})
  or ls_settle(ls)
if foreign then
  return foreign
end
local swept = #ls.expired > 0
local released = 0
for index = 2, #ARGV do
  local id = ARGV[index]
  local deadline = line_owner(id) == owner and ls_deadline(ls, id)
  if deadline then
    local entry = ls.entries[id]
    if ls_mode(entry) == 'w' then
      ls_remove(ls, id, entry, deadline)
      released = 1
    end
  end
end
ls_drop_swept(ls)
redis.call('hdel', offers, owner)
redis.call('zrem', waiters, owner)
local removed = redis.call('lrem', queue, 0, owner)
local handed = false
if released == 1 or removed > 0 or swept then
  handed = rw_hand_off(ls, counter, queue, waiters, offers)
end
ls_close(ls)
if (released == 1 or removed > 0 or swept) and not handed then
  redis.pcall('publish', holds .. ':released', released == 1 and '1' or '0')
end
return {removed, released}
