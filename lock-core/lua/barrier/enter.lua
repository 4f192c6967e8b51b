-- Enters a barrier as one of its parties: a hold of the name's lease set
-- (barrier/state.lua) for the TTL, while the barrier fills; the party whose
-- entry makes the count opens the round for all.
--
-- KEYS[1]  the lease set's sorted set (its channel, `KEYS[1]:released`, is
--          where parties and other kinds' waiters listen)
-- KEYS[2]  the lease set's entries and tallies (a hash)
-- KEYS[3]  the barrier's record, `<parties>:<round>[:open]`
-- KEYS[4]  the parties that left (a sorted set, barrier/state.lua's
--          barrier_bury): an id among them is kept out
-- ARGV[1]  the party's hold id, `<owner>:<nonce>`
-- ARGV[2]  the party count, from 1 to 999,999,999
-- ARGV[3]  the TTL in ms
--
-- Reply:
--   {1, entered, open, round}  entered (or, for an id already live, a
--                       retried attempt, renewed for the TTL): `entered` is
--                       the live parties with this one, `open` 1 when the
--                       round is open (this entry made the count, or one
--                       before it did), `round` the round's id
--   {0, wait_ms}        another kind holds the name, for `wait_ms` more
--                       (-1: no expiry); nothing written
--   {-1, parties}       the barrier's live parties entered with another
--                       party count; nothing written
--   {-3, entered}       the round is open, or full: a party of the next
--                       round enters once every party has left; nothing
--                       written
--   {-4}                this id left or withdrew: an attempt that landed
--                       late enters nothing; nothing written
--   {-2, key, detail}   a key holds something that is not this barrier's;
--                       nothing written
-- Missing KEYS, or an ARGV that is not a whole number from 1, is an error
-- reply before anything is read. Every check comes before the first write.
-- An entry that opens the round publishes on `KEYS[1]:released`.
if #KEYS < 4 then
  return redis.error_reply('ERR barrier_enter: four keys expected')
end
local set, held, record, left = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local parties, ttl = ls_count(ARGV[2], 9), ls_count(ARGV[3], 14)
if not (id and parties and ttl) then
  return redis.error_reply('ERR barrier_enter: the party count and TTL must be whole numbers from 1')
end
local now = ls_now()
local stored, open, round, problem = barrier_record(record)
if problem then
  return problem
end
problem = ls_foreign({left}, {'zset'})
if problem then
  return problem
end
local ls, other
ls, other, problem = ls_open_as('b', set, held, nil, now, {id})
if problem then
  return problem
end
if other then
  return {0, other}
end
-- A retried attempt: its own party, renewed.
if ls_deadline(ls, id) and stored then
  if stored ~= parties then
    return {-1, stored}
  end
  ls_add(ls, id, now + ttl)
  ls_close(ls)
  barrier_keep(ls, record, stored, open, round)
  return {1, ls.parties, open and 1 or 0, round}
end
if barrier_buried(left, id, now) then
  return {-4}
end
-- Every party counted is live: a dead one is never counted as present.
problem = ls_settle(ls)
if problem then
  return problem
end
if ls.parties <= 0 or not stored then
  -- No live party (or no record: it was deleted): a new round.
  stored, open, round = nil, false, barrier_round()
end
if stored and stored ~= parties then
  return {-1, stored}
end
if open or ls.parties >= parties then
  return {-3, ls.parties}
end
ls_add(ls, id, now + ttl, 'b' .. ttl)
open = ls.parties >= parties
ls_close(ls)
barrier_keep(ls, record, parties, open, round)
if open then
  redis.pcall('publish', set .. ':released', '1')
end
return {1, ls.parties, open and 1 or 0, round}
