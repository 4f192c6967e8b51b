-- Gives back one hold of a read-write lock, once.
--
-- KEYS[1]  the holds (the lease set's sorted set; see rw/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the lease set's slots (a semaphore's; swept permits free theirs)
-- KEYS[4..7]  (optional: the server-side hand-off, rw_hand_off in rw/common.lua)
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
if #KEYS < 3 then
  return redis.error_reply('ERR rw_release: three keys expected')
end
local holds, held, slots = KEYS[1], KEYS[2], KEYS[3]
if not ARGV[1] then
  return redis.error_reply('ERR rw_release: the hold id expected')
end
local now = ls_now()
local ls, problem = ls_open_own('rw', holds, held, slots, now, {ARGV[1]})
if not ls then
  -- Another kind holds the name: no hold of ours there, and nothing of it
  -- is written; an offer naming the id (an attempt whose reply was lost)
  -- is still dropped, so no later hand-off grants it.
  if problem == 0 and #KEYS >= 7 then
    line_void_offer(KEYS[7], ARGV[1], 'w')
  end
  return problem
end
-- With writers in line, the hand-off's count comes first.
local waiting
waiting, problem = ls_line(ls, #KEYS >= 7 and KEYS[5])
if problem then
  return problem
end
local wake = #ls.expired > 0
local released = 0
local deadline = ls_deadline(ls, ARGV[1])
if deadline then
  local entry = ls.entries[ARGV[1]]
  local mode = ls_mode(entry)
  ls_remove(ls, ARGV[1], entry, deadline)
  released = 1
  wake = wake or mode ~= 'r' or ls.n == 0
end
-- Nobody waits in line: one command.
if waiting then
  line_void_offer(KEYS[7], ARGV[1], 'w')
  if wake and rw_hand_off(ls, KEYS[4], KEYS[5], KEYS[6], KEYS[7]) then
    ls_close(ls)
    return released
  end
end
ls_close(ls)
if wake then
  redis.pcall('publish', holds .. ':released', '1')
end
return released
