-- Renews a live hold of a read-write lock to a deadline of the TTL from
-- now; never one that ended: an expired hold is dropped first, and renews
-- as not held.
--
-- KEYS[1]  the holds (a sorted set; see rw/common.lua)
-- KEYS[2]  the modes (a hash)
-- KEYS[3]  (optional) the write counter: one with a TTL is kept at least
--          as long as the last live hold
-- ARGV[1]  the hold id
-- ARGV[2]  the TTL in ms
--
-- Reply: 1 renewed; 0 the hold is not live (nothing renewed); {-2, key,
-- type} a key holds another type (nothing written).
if #KEYS < 2 then
  return redis.error_reply('ERR rw_renew: two keys expected')
end
local holds, modes = KEYS[1], KEYS[2]
local ttl = sem_count(ARGV[2], 14)
if not (ARGV[1] and ttl) then
  return redis.error_reply('ERR rw_renew: the TTL must be a whole number from 1')
end
local now, foreign = sem_open(holds, modes)
if not now then
  return foreign
end
if not redis.call('zscore', holds, ARGV[1]) then
  return 0
end
redis.call('zadd', holds, 'xx', now + ttl, ARGV[1])
rw_keep(holds, modes, KEYS[3], now)
return 1
