-- Takes one permit of a weight in a semaphore of a limit, if that weight
-- fits beside the live permits: the permit gets the lowest slot no live
-- permit has, and the next fencing token of that slot.
--
-- KEYS[1]  the permits (a sorted set; see semaphore.lua)
-- KEYS[2]  the held entries (a hash)
-- KEYS[3]  the limit (a string)
-- KEYS[4]  the slots' fencing counters (a hash)
-- ARGV[1]  the permit id, `<owner>:<nonce>`
-- ARGV[2]  the weight, at least 1 and at most the limit
-- ARGV[3]  the limit, from 1 to 999,999,999
-- ARGV[4]  the TTL in ms
--
-- Reply:
--   {1, slot, token}     granted (the token as text), with a deadline of the
--                        TTL from now; for an id already live (a retried
--                        attempt), its own slot and token, its deadline set
--                        again to the TTL from now
--   {0, used, wait_ms}   the weight does not fit: `used` is the weight of the
--                        live permits, `wait_ms` how long until the first of
--                        them ends; only expired permits were removed
--   {-1, limit}          the semaphore was created with another limit, which
--                        it keeps: nothing was written
--   {-2, key, detail}    a key holds something that is not this semaphore's
--                        (another type, or an entry, limit or counter that
--                        does not parse): nothing was written
--   {-3, limit}          the weight is above the limit: it can never fit;
--                        nothing was written
-- Missing KEYS, or an ARGV that is not a whole number from 1, is an error
-- reply before anything is read. Every check comes before the first write;
-- TIME is read before it too, so a user whose ACL refuses it writes nothing.
-- The cost is in the number of live permits (at most the limit).
if #KEYS < 4 then
  return redis.error_reply('ERR semaphore_acquire: four keys expected')
end
local permits, held, limit_key, fences = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local weight, limit, ttl = sem_count(ARGV[2], 9), sem_count(ARGV[3], 9), sem_count(ARGV[4], 14)
if not (id and weight and limit and ttl) then
  return redis.error_reply('ERR semaphore_acquire: the weight, limit and TTL must be whole numbers from 1')
end
local foreign = sem_foreign({permits, held, limit_key, fences}, {'zset', 'hash', 'string', 'hash'})
if foreign then
  return foreign
end
local stored = redis.call('get', limit_key)
if stored then
  if not sem_count(stored, 9) then
    return {-2, limit_key, 'the limit is not a whole number from 1'}
  end
  if tonumber(stored) ~= limit then
    return {-1, tonumber(stored)}
  end
end
if weight > limit then
  return {-3, limit}
end
local now = sem_now()
-- Read everything first; an expired permit's entry may be lost (it is
-- dropped with it), a live one's may not.
local expired = redis.call('zrangebyscore', permits, '-inf', now)
local live = redis.call('zrangebyscore', permits, '(' .. now, '+inf', 'withscores')
local used, taken, first, mine = 0, {}, nil, nil
for index = 1, #live, 2 do
  local entry_weight, slot, token = sem_entry(redis.call('hget', held, live[index]))
  if not entry_weight then
    return {-2, held, 'a live permit has no entry <weight>:<slot>:<token>'}
  end
  used = used + entry_weight
  taken[slot] = true
  first = first or tonumber(live[index + 1])
  if live[index] == id then
    mine = {slot, token}
  end
end
if mine then
  sem_drop(permits, held, expired)
  redis.call('zadd', permits, 'xx', now + ttl, id)
  sem_keep(permits, held, now)
  return {1, mine[1], mine[2]}
end
if used + weight > limit then
  sem_drop(permits, held, expired)
  return {0, used, first - now}
end
local slot = 0
while taken[slot] do
  slot = slot + 1
end
local last = redis.call('hget', fences, slot)
if last and (not string.match(last, '^%d+$') or #last > 18) then
  return {-2, fences, 'the counter of slot ' .. slot .. ' is not a number below 10^18'}
end
sem_drop(permits, held, expired)
redis.call('hincrby', fences, slot, 1)
-- As text, as a retried attempt's token is read from its entry.
local token = redis.call('hget', fences, slot)
redis.call('zadd', permits, now + ttl, id)
redis.call('hset', held, id, ARGV[2] .. ':' .. slot .. ':' .. token)
if not stored then
  redis.call('set', limit_key, ARGV[3])
end
sem_keep(permits, held, now)
return {1, slot, token}
