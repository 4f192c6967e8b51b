-- Takes a fair semaphore's waiter out of the line (it gave up waiting, or
-- its future was dropped), with its offer, and gives back a permit a
-- release granted meanwhile (sem_hand_off in semaphore/common.lua) to an id it
-- will never take up.
--
-- KEYS[1]  the permits (the lease set's sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the free slots (a sorted set; see lease_set/common.lua)
-- KEYS[4]  the limit
-- KEYS[5]  the slots' fencing counters
-- KEYS[6]  the waiter queue
-- KEYS[7]  the waiters' deadlines
-- KEYS[8]  the waiters' offers
-- ARGV[1]  the owner (the waiter's place)
-- ARGV[2..]  the permit ids the waiter may have offered: its answered
--          attempt's, and those of attempts still in flight or whose
--          replies were lost
--
-- Reply: {removed, released}: the queue entries removed (0 or 1), and 1
-- when a permit granted to one of the ids was given back, else 0;
-- {-2, key, type} when a key holds another type (nothing was written).
-- What that frees goes to the next waiters' offers that fit; the weight
-- left over is published as a bare number, which wakes every waiter, and
-- a waiter that only left publishes '0' so the next in line tries at once.
if #KEYS < 8 or not ARGV[1] then
  return redis.error_reply('ERR semaphore_give_up: eight keys and an owner expected')
end
local permits, held, slots, limit_key, fences = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local queue, waiters, offers = KEYS[6], KEYS[7], KEYS[8]
local owner = ARGV[1]
local now = ls_now()
local ids = {}
for index = 2, #ARGV do
  ids[#ids + 1] = ARGV[index]
end
local ls, problem = ls_open_own('p', permits, held, slots, now, ids)
if not ls and problem == 0 then
  return sem_leave_beside_other(permits, queue, waiters, offers, owner)
end
if not ls then
  return problem
end
local foreign = ls_foreign({limit_key, fences, queue, waiters, offers},
  {'string', 'hash', 'list', 'zset', 'hash'}) or ls_settle(ls)
if foreign then
  return foreign
end
local released = 0
for index = 2, #ARGV do
  local id = ARGV[index]
  local deadline = line_owner(id) == owner and ls_deadline(ls, id)
  if deadline then
    ls_remove(ls, id, ls.entries[id], deadline)
    released = 1
  end
end
ls_drop_swept(ls)
redis.call('hdel', offers, owner)
redis.call('zrem', waiters, owner)
local removed = redis.call('lrem', queue, 0, owner)
local granted, stalled = sem_hand_off(ls, limit_key, fences, queue, waiters, offers)
local freed = ls.opened_weight - ls.weight + granted
ls_close(ls)
if freed > granted then
  redis.pcall('publish', permits .. ':released', freed - granted)
elseif stalled or (removed > 0 and granted == 0) then
  redis.pcall('publish', permits .. ':released', 0)
end
return {removed, released}
