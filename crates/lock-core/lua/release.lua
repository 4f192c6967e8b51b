-- Releases a single-node lock for its owner (compare-and-delete).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
--
-- Reply: 1 when deleted, 0 when the key is gone or held by another owner.
-- A key of another type (not a string) makes GET fail with WRONGTYPE.
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
