-- Takes over a live permit for a new id (a hand-off resumed elsewhere): the
-- same weight, slot and token under the new id, renewed to a TTL from now,
-- in one step, so commands of the old id still in flight act on nothing.
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries (a hash)
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
if #KEYS < 2 then
  return redis.error_reply('ERR semaphore_take_over: two keys expected')
end
local permits, held = KEYS[1], KEYS[2]
local ttl = sem_count(ARGV[3], 14)
if not (ARGV[1] and ARGV[2] and ttl and ARGV[4]) then
  return redis.error_reply('ERR semaphore_take_over: two ids, a TTL and an entry expected')
end
local now, foreign = sem_open(permits, held)
if not now then
  return foreign
end
if not redis.call('zscore', permits, ARGV[1]) then
  return 0
end
local entry = redis.call('hget', held, ARGV[1])
if not sem_entry(entry) then
  return {-2, held, 'a live permit has no entry <weight>:<slot>:<token>'}
end
if entry ~= ARGV[4] then
  return 0
end
redis.call('zrem', permits, ARGV[1])
redis.call('hdel', held, ARGV[1])
redis.call('zadd', permits, now + ttl, ARGV[2])
redis.call('hset', held, ARGV[2], entry)
sem_keep(permits, held, now)
return 1
