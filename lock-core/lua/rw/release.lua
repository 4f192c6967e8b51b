-- Gives back one hold of a read-write lock, once.
--
-- KEYS[1]  the holds (a sorted set; see rw/common.lua)
-- KEYS[2]  the modes (a hash)
-- KEYS[3..6]  (optional: the server-side hand-off, rw_hand_off in rw/common.lua)
--          the write counter, the waiting writers' queue, their deadlines
--          and their offers
-- ARGV[1]  the hold id
--
-- Reply: 1 released; 0 the hold is not live (nothing released); {-2, key,
-- type} a key holds another type (nothing written).
-- What may let a waiter in is published on `KEYS[1]:released`: the release
-- of a write (readers and the next writer may go), of the last live hold
-- (a writer may go), or the drop of expired holds. With the hand-off keys,
-- a release that leaves no hold live first grants the write to the first
-- waiting writer's offer, and publishes that grant instead; an offer that
-- names the released id (an attempt whose reply was lost) is dropped
-- first, never granted. A reader's
-- release with other holds left lets nobody in, and wakes nobody. The
-- publish is a `pcall`: without pub/sub rights, waiters find out by their
-- timers.
if #KEYS < 2 then
  return redis.error_reply('ERR rw_release: two keys expected')
end
local holds, modes = KEYS[1], KEYS[2]
if not ARGV[1] then
  return redis.error_reply('ERR rw_release: the hold id expected')
end
-- Another kind holds the name: no hold of ours there, and nothing of it
-- is written; an offer naming the id (an attempt whose reply was lost) is
-- still dropped, so no later hand-off grants it.
if sem_held_by_other(holds, modes) then
  if #KEYS >= 6 then
    line_void_offer(KEYS[6], ARGV[1], 'w')
  end
  return 0
end
local foreign = sem_foreign({holds, modes}, {'zset', 'hash'})
if foreign then
  return foreign
end
local now = sem_now()
local expired = redis.call('zrangebyscore', holds, '-inf', now)
sem_drop(holds, modes, expired)
local wake = #expired > 0
local released = 0
if redis.call('zscore', holds, ARGV[1]) then
  local mode = rw_entry(redis.call('hget', modes, ARGV[1]))
  sem_drop(holds, modes, {ARGV[1]})
  sem_keep(holds, modes, now)
  released = 1
  wake = wake or mode ~= 'r' or redis.call('zcard', holds) == 0
end
-- Nobody waits in line: one command.
if #KEYS >= 6 and redis.call('type', KEYS[4])['ok'] == 'list' then
  line_void_offer(KEYS[6], ARGV[1], 'w')
  if wake and rw_hand_off(holds, modes, KEYS[3], KEYS[4], KEYS[5], KEYS[6], now) then
    return released
  end
end
if wake then
  redis.pcall('publish', holds .. ':released', '1')
end
return released
