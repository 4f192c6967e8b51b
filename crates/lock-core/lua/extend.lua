-- Renews a single-node lock for its owner (compare-and-extend).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
-- ARGV[2]  the new TTL in milliseconds, counted from now
--
-- Reply: 1 when extended, 0 when the key is gone or held by another owner.
-- A key of another type (not a string) makes GET fail with WRONGTYPE.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
