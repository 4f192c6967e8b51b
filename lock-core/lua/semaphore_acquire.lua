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
-- ARGV[3]  the limit, at least 1
-- ARGV[4]  the TTL in ms
--
-- Reply:
--   {1, slot, token}     granted (the token as text); for an id already
--                        live, its own slot and token again (a retried
--                        attempt), its deadline as it was
--   {0, used, wait_ms}   the weight does not fit: `used` is the weight of the
--                        live permits, `wait_ms` how long until the first of
--                        them ends (-1 when none is live: the weight is above
--                        the limit); only the clean-up was written
--   {-1, limit}          the semaphore was created with another limit, which
--                        it keeps: nothing was written
--   {-2, key, detail}    a key holds something that is not this semaphore's
--                        (another type, or an entry or limit that does not
--                        parse): nothing was written
-- An ARGV that is not a whole number from 1 is an error reply, before
-- anything is read or written. Every check comes before the first write; TIME is read before it too, so a
-- user whose ACL refuses it writes nothing.
local permits, held, limit_key, fences = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local weight, limit, ttl = sem_count(ARGV[2]), sem_count(ARGV[3]), sem_count(ARGV[4])
if not (id and weight and limit and ttl) then
  return redis.error_reply('ERR semaphore_acquire: the weight, limit and TTL must be whole numbers from 1')
end
local foreign = sem_foreign({permits, held, limit_key, fences}, {'zset', 'hash', 'string', 'hash'})
if foreign then
  return foreign
end
local stored = redis.call('get', limit_key)
if stored then
  if not string.match(stored, '^[1-9]%d*$') then
    return {-2, limit_key, 'the limit is not a positive number'}
  end
  if tonumber(stored) ~= limit then
    return {-1, tonumber(stored)}
  end
end
local now = sem_now()
local live, used, first = sem_read(permits, held, now)
if not live then
  return used
end
local mine = live[id]
if mine then
  return {1, mine.slot, mine.token}
end
if used + weight > limit then
  local wait = -1
  if first then
    wait = first - now
  end
  return {0, used, wait}
end
local taken = {}
for _, entry in pairs(live) do
  taken[entry.slot] = true
end
local slot = 0
while taken[slot] do
  slot = slot + 1
end
redis.call('hincrby', fences, slot, 1)
-- As text, exact past 2^53 (a Lua number is a double), as a retried
-- attempt's token is read from its entry.
local token = redis.call('hget', fences, slot)
redis.call('zadd', permits, now + ttl, id)
redis.call('hset', held, id, weight .. ':' .. slot .. ':' .. token)
if not stored then
  redis.call('set', limit_key, limit)
end
sem_keep(permits, held, now)
return {1, slot, token}
