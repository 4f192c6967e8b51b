-- Takes a waiter out of a queue of waiters (it gave up waiting): a fair
-- lock's or semaphore's, or a read-write lock's waiting writers.
--
-- KEYS[1]  the waiter queue (list)
-- KEYS[2]  the waiters' deadlines (zset)
-- KEYS[3]  (optional) the lock's key: a waiter that left is published on
--          `KEYS[3]:released`, so those it held back (the next in line,
--          readers behind a waiting writer) try again at once rather than
--          when its place would have run out
-- ARGV[1]  the owner token
--
-- Reply: the number of queue entries removed (0 or 1).
redis.call('zrem', KEYS[2], ARGV[1])
local removed = redis.call('lrem', KEYS[1], 0, ARGV[1])
if removed > 0 and KEYS[3] then
  redis.pcall('publish', KEYS[3] .. ':released', '0')
end
return removed
