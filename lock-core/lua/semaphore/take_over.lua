-- Takes over a live permit for a new id (a hand-off resumed elsewhere): the
-- same weight, slot and token under the new id, renewed to a TTL from now,
-- in one step, so commands of the old id still in flight act on nothing.
--
-- KEYS[1]  the permits (the lease set's sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the free slots (a sorted set; see lease_set/common.lua)
-- ARGV[1]  the permit id handed off
-- ARGV[2]  the new id
-- ARGV[3]  the TTL in ms
-- ARGV[4]  the entry the hand-off claims for the permit,
--          `<weight>:<slot>:<token>`: a token names its slot's counter only,
--          so the whole entry must match
--
-- Reply: 1 when taken over; 0 when the handed-off permit is not live or
-- its entry is not the one claimed (nothing of it written); {-2, key, detail}
-- when a key holds another type or the entry does not parse (nothing
-- written). Missing KEYS or a TTL that is not a whole number from 1 is an
-- error reply before anything is read.
if #KEYS < 3 then
  return redis.error_reply('ERR semaphore_take_over: three keys expected')
end
local ttl = ls_count(ARGV[3], 14)
if not (ARGV[1] and ARGV[2] and ttl and ARGV[4]) then
  return redis.error_reply('ERR semaphore_take_over: two ids, a TTL and an entry expected')
end
local now = ls_now()
local ls, problem = ls_open_own('p', KEYS[1], KEYS[2], KEYS[3], now, {ARGV[1]})
if not ls then
  return problem
end
local deadline = ls_deadline(ls, ARGV[1])
if not deadline then
  ls_close(ls)
  return 0
end
local entry = ls.entries[ARGV[1]]
if not ls_permit(entry) then
  return {-2, KEYS[2], 'a live permit has no entry <weight>:<slot>:<token>'}
end
if entry ~= ARGV[4] then
  ls_close(ls)
  return 0
end
ls_remove(ls, ARGV[1], entry, deadline)
ls_add(ls, ARGV[2], now + ttl, entry)
ls_close(ls)
return 1
