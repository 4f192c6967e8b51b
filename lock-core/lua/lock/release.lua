-- Releases a single-node (or one Redlock node's) lock for the hold that took
-- it (compare-and-delete), and tells waiters.
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional: single node, with `holder_info`) the holder
--          information, deleted with the lock
-- ARGV[1]  the hold's value, `<owner>:<nonce>`, with `#<token>` behind it
--          once granted with one (shared/renew.lua's `holds` says what it matches)
--
-- Reply: 1 when deleted, 0 when the key is gone or holds another value (a
-- later hold of the same owner included), or another kind's hold of the
-- name (shared/renew.lua's `lock_value`).
-- A deletion is published on `KEYS[1]:released`, in the same atomic step, so a
-- waiter subscribed before its last attempt cannot miss it. The publish is a
-- `pcall`: a user whose ACL grants no pub/sub channels still releases, and its
-- waiters wake on their timers instead.
-- `holds` comes from shared/renew.lua, loaded in front of this file.
if holds(lock_value(KEYS[1]), ARGV[1]) then
  redis.call('del', KEYS[1])
  if KEYS[2] then
    redis.call('del', KEYS[2])
  end
  redis.pcall('publish', KEYS[1] .. ':released', '1')
  return 1
end
return 0
