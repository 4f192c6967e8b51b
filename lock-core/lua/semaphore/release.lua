-- Gives back one permit, if it is still live, and tells waiters how much
-- weight that freed.
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries (a hash)
-- KEYS[3..7]  (optional: the server-side hand-off of fair mode,
--          sem_hand_off in semaphore/common.lua) the limit, the slots' fencing
--          counters, the waiter queue, the waiters' deadlines and offers
-- ARGV[1]  the permit id
--
-- Reply: 1 when released; 0 when the permit was not live (a second
-- release, or one after it expired: nothing is credited); {-2, key,
-- detail} when KEYS[1] or KEYS[2] holds another type (nothing written).
-- A hand-off key of another type, or an entry that does not parse, only
-- stops the hand-off: the release publishes what it freed.
-- A release publishes the weight it freed (its own, and that of the expired
-- permits it dropped) on `KEYS[1]:released`, in the same atomic step, so a
-- waiter for more than that can go on waiting. With the hand-off keys, what
-- it frees first goes to the offers of the waiters at the head of the line
-- while their weights fit (each grant published as such), and only the rest
-- is published; an offer naming the released id (an attempt whose reply was
-- lost) is dropped first, never granted. The publish is a `pcall`: a
-- user without pub/sub channels still releases. Missing KEYS is an error
-- reply before anything is read. The cost is in the number of expired
-- permits, and with waiters in line in the number of live ones.
if #KEYS < 2 then
  return redis.error_reply('ERR semaphore_release: two keys expected')
end
local permits, held = KEYS[1], KEYS[2]
if not ARGV[1] then
  return redis.error_reply('ERR semaphore_release: the permit id expected')
end
local now, freed = sem_open(permits, held)
if not now then
  -- Another kind holds the name (0), or foreign data: an offer naming the
  -- id (an attempt whose reply was lost) is still dropped, so no later
  -- hand-off grants it (line_void_offer writes nothing but a hash).
  if freed == 0 and #KEYS >= 7 then
    line_void_offer(KEYS[7], ARGV[1], 'p')
  end
  return freed
end
local released = 0
if redis.call('zscore', permits, ARGV[1]) then
  freed = freed + (sem_entry(redis.call('hget', held, ARGV[1])) or 0)
  sem_drop(permits, held, {ARGV[1]})
  sem_keep(permits, held, now)
  released = 1
end
local granted, stalled = 0, false
-- Nobody waits in line (a semaphore outside fair mode): one command.
if #KEYS >= 7 and redis.call('type', KEYS[5])['ok'] == 'list' then
  line_void_offer(KEYS[7], ARGV[1], 'p')
  if freed > 0 then
    granted, stalled = sem_hand_off(permits, held, KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], now)
  end
end
if freed > granted or stalled then
  redis.pcall('publish', permits .. ':released', math.max(freed - granted, 0))
end
return released
