-- Renews one live permit to a TTL from now; never revives one that has
-- ended (expired, or released).
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries (a hash)
-- ARGV[1]  the permit id
-- ARGV[2]  the TTL in ms
--
-- Reply: 1 when renewed; 0 when the permit is not live (nothing renewed);
-- {-2, key, detail} when a key holds another type (nothing written).
-- Missing KEYS or a TTL that is not a whole number from 1 is an error reply
-- before anything is read. The cost is in the number of expired permits.
if #KEYS < 2 then
  return redis.error_reply('ERR semaphore_renew: two keys expected')
end
local permits, held = KEYS[1], KEYS[2]
local ttl = sem_count(ARGV[2], 14)
if not (ARGV[1] and ttl) then
  return redis.error_reply('ERR semaphore_renew: the TTL must be a whole number from 1')
end
local now, foreign = sem_open(permits, held)
if not now then
  return foreign
end
local deadline = redis.call('zscore', permits, ARGV[1])
if not deadline then
  return 0
end
redis.call('zadd', permits, 'xx', now + ttl, ARGV[1])
sem_keep(permits, held, now)
return 1
