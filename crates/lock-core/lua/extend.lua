-- Renews a single-node (or one Redlock node's) lock for the hold that took it
-- (compare-and-extend).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the hold's value, `<owner>:<nonce>`
-- ARGV[2]  the new TTL in milliseconds, counted from now; it replaces the old
--          one, shorter or longer, and the holder's deadline follows it
--
-- Reply: 1 when extended, 0 when the key is gone or holds another value (a
-- later hold of the same owner included).
-- A key of another type (not a string) makes GET fail with WRONGTYPE.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
