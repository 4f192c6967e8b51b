-- Releases a single-node lock for its owner (compare-and-delete), and tells
-- waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner token
--
-- Reply: 1 when deleted, 0 when the key is gone or held by another owner.
-- A deletion is published on `KEYS[1]:released`, in the same atomic step, so a
-- waiter subscribed before its last attempt cannot miss it.
-- A key of another type (not a string) makes GET fail with WRONGTYPE.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', KEYS[1] .. ':released', '1')
  return 1
end
return 0
