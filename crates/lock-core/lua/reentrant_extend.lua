-- Renews a reentrant lock for the owner that holds it, whatever its count.
--
-- KEYS[1]  the lock key (a hash)
-- ARGV[1]  the owner token
-- ARGV[2]  the new TTL in milliseconds, counted from now
--
-- Reply: 1 when extended, 0 when the key is gone or held by another owner.
-- A KEYS[1] that is not a hash makes HEXISTS fail with WRONGTYPE.
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
