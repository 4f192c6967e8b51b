-- Moves a live hold of a read-write lock to a new id (a resumed hand-off),
-- keeping its mode and token, and renews it: only while the hold has the
-- very entry the hand-off token claims.
--
-- KEYS[1]  the holds (the lease set's sorted set; see rw/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the lease set's slots (a semaphore's; swept permits free theirs)
-- KEYS[4]  (optional) the write counter: one with a TTL is kept at least
--          as long as the last live hold
-- ARGV[1]  the hold id handed off
-- ARGV[2]  the new id
-- ARGV[3]  the TTL in ms
-- ARGV[4]  the entry claimed, `r:<epoch>` or `w:<token>`
--
-- The new id is another owner's. An owner's holds re-enter beside each
-- other, so a hold whose owner has another live hold, one of the two a
-- write (a re-entered write, a downgrade's read), is not taken over
-- alone: it would become a writer beside another owner's hold.
--
-- Reply: 1 taken over; 0 the hold is not live with that entry; {-4} its
-- owner has another live hold, one of them a write; {-2, key, type} a key
-- holds another type. Nothing but expired holds is written unless the
-- reply is 1.
if #KEYS < 3 then
  return redis.error_reply('ERR rw_take_over: three keys expected')
end
local holds, held, slots = KEYS[1], KEYS[2], KEYS[3]
local from, to, ttl, claimed = ARGV[1], ARGV[2], ls_count(ARGV[3], 14), ARGV[4]
if not (from and to and ttl and claimed) then
  return redis.error_reply('ERR rw_take_over: two ids, a TTL from 1 and an entry expected')
end
local now = ls_now()
local ls, problem = ls_open_own('rw', holds, held, slots, now, {from}, {line_owner(from) .. ':o'})
if not ls then
  return problem
end
local deadline = ls_deadline(ls, from)
if not deadline or ls.entries[from] ~= claimed then
  ls_close(ls)
  return 0
end
local mode = ls_mode(claimed)
if not mode then
  return {-2, held, 'a live hold has no entry r:<epoch> or w:<token>'}
end
-- The owner's other holds, by its tallies (this hold is counted in them),
-- expired ones swept first.
local function beside(own)
  return mode == 'w' and own[1] + own[2] > 1 or mode == 'r' and own[2] > 0
end
if beside(ls_owner_tally(ls, line_owner(from))) then
  problem = ls_settle(ls)
  if problem then
    return problem
  end
  if beside(ls_owner_tally(ls, line_owner(from))) then
    ls_close(ls)
    return {-4}
  end
end
ls_remove(ls, from, claimed, deadline)
ls_add(ls, to, now + ttl, claimed)
ls_close(ls)
rw_counter_outlives(ls, KEYS[4])
return 1
