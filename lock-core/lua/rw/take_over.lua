-- Moves a live hold of a read-write lock to a new id (a resumed hand-off),
-- keeping its mode and token, and renews it: only while the hold has the
-- very entry the hand-off token claims.
--
-- KEYS[1]  the holds (a sorted set; see rw/common.lua)
-- KEYS[2]  the modes (a hash)
-- KEYS[3]  (optional) the write counter: one with a TTL is kept at least
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
if #KEYS < 2 then
  return redis.error_reply('ERR rw_take_over: two keys expected')
end
local holds, modes = KEYS[1], KEYS[2]
local from, to, ttl, claimed = ARGV[1], ARGV[2], sem_count(ARGV[3], 14), ARGV[4]
if not (from and to and ttl and claimed) then
  return redis.error_reply('ERR rw_take_over: two ids, a TTL from 1 and an entry expected')
end
local now, foreign = sem_open(holds, modes)
if not now then
  return foreign
end
if not redis.call('zscore', holds, from) or redis.call('hget', modes, from) ~= claimed then
  return 0
end
local live, problem = rw_live(holds, modes, now)
if not live then
  return problem
end
local owner, writes = line_owner(from), string.sub(claimed, 1, 1) == 'w'
for _, hold in ipairs(live) do
  if hold[1] ~= from and line_owner(hold[1]) == owner and (writes or hold[2] == 'w') then
    return {-4}
  end
end
sem_drop(holds, modes, {from})
redis.call('zadd', holds, now + ttl, to)
redis.call('hset', modes, to, claimed)
rw_keep(holds, modes, KEYS[3], now)
return 1
