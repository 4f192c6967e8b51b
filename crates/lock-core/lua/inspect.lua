-- Reads a lock's state without changing it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
--
-- Reply: {pttl, counter}
--   pttl     remaining TTL in milliseconds; -2 when the key does not exist,
--            -1 when it exists without an expiry
--   counter  the last fencing token issued, as a string, or nil if none yet
return {redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2])}
