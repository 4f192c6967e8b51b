-- Takes a waiter out of a fair lock's queue (it gave up waiting).
--
-- KEYS[1]  the waiter queue (list)
-- KEYS[2]  the waiters' deadlines (zset)
-- ARGV[1]  the owner token
--
-- Reply: the number of queue entries removed (0 or 1).
redis.call('zrem', KEYS[2], ARGV[1])
return redis.call('lrem', KEYS[1], 0, ARGV[1])
