-- Gives back one permit, if it is still live, and tells waiters how much
-- weight is left in use.
--
-- KEYS[1]  the permits (the lease set's sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the free slots (a sorted set; see lease_set/common.lua)
-- KEYS[4..8]  (optional: the server-side hand-off of fair mode,
--          sem_hand_off in semaphore/common.lua) the limit, the slots' fencing
--          counters, the waiter queue, the waiters' deadlines and offers
-- ARGV[1]  the permit id
--
-- Reply: 1 when released; 0 when the permit was not live (a second
-- release, or one after it expired: nothing is credited); {-2, key,
-- detail} when KEYS[1] or KEYS[2] holds another type or the tallies do not
-- match the permits (nothing written).
-- A hand-off key of another type, or an entry that does not parse, only
-- stops the hand-off: the release publishes as it would without it.
-- A release that frees weight (its own, or that of the expired permits it
-- dropped) publishes `u<weight in use>` on `KEYS[1]:released`, in the same
-- atomic step: each process wakes, in order, the waiters whose weight fits
-- beside it, and no others. When more expired permits are left than one
-- sweep reads (lease_set/common.lua), the weight in use is not known
-- without reading them all: the release publishes the weight it freed
-- instead, a bare number, which wakes every waiter. With the hand-off keys,
-- what it frees first goes to the offers of the waiters at the head of the
-- line while their weights fit (each grant published as such), and the
-- weight in use is published only when some is left over (or a head must
-- be woken to take its own turn); an offer naming the released id (an
-- attempt whose reply was lost) is dropped first, never granted. The
-- publish is a `pcall`: a user without pub/sub channels still releases.
-- Missing KEYS is an error reply before anything is read. The cost is in
-- the expired permits swept (lease_set/common.lua), not in the live ones.
if #KEYS < 3 then
  return redis.error_reply('ERR semaphore_release: three keys expected')
end
local permits, held, slots = KEYS[1], KEYS[2], KEYS[3]
if not ARGV[1] then
  return redis.error_reply('ERR semaphore_release: the permit id expected')
end
local now = ls_now()
local ls, problem = ls_open_own('p', permits, held, slots, now, {ARGV[1]})
if not ls then
  -- Another kind holds the name (0), or foreign data: an offer naming the
  -- id (an attempt whose reply was lost) is still dropped, so no later
  -- hand-off grants it (line_void_offer writes nothing but a hash).
  if problem == 0 and #KEYS >= 8 then
    line_void_offer(KEYS[8], ARGV[1], 'p')
  end
  return problem
end
-- With waiters in line (fair mode), the hand-off's count comes first.
local waiting
waiting, problem = ls_line(ls, #KEYS >= 8 and KEYS[6])
if problem then
  return problem
end
local released = 0
local deadline = ls_deadline(ls, ARGV[1])
if deadline then
  ls_remove(ls, ARGV[1], ls.entries[ARGV[1]], deadline)
  released = 1
end
local freed = ls.opened_weight - ls.weight
local granted, stalled = 0, false
-- Nobody waits in line (a semaphore outside fair mode): one command.
if waiting then
  line_void_offer(KEYS[8], ARGV[1], 'p')
  if freed > 0 then
    granted, stalled = sem_hand_off(ls, KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
  end
end
-- What the hand-off's own sweep freed counts too.
freed = ls.opened_weight - ls.weight + granted
ls_close(ls)
if freed > granted or stalled then
  if ls.swept then
    redis.pcall('publish', permits .. ':released', 'u' .. ls.weight)
  else
    -- More expired permits than one sweep reads are still counted in
    -- `:weight`: published as in use, they would keep out a waiter that
    -- fits. A bare number wakes every waiter instead.
    redis.pcall('publish', permits .. ':released', math.max(freed - granted, 0))
  end
end
return released
