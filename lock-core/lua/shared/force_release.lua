-- Deletes a lock whoever holds it (operators only), and tells waiters. The
-- fencing counter is kept, so tokens stay monotonic.
--
-- KEYS[1]  the lock key (a string or a hash, whatever the strategy)
-- KEYS[2]  (optional) the holder information, deleted with it
--
-- Reply: 1 when a key was deleted, 0 when there was none.
-- The publish is a `pcall`, as in lock/release.lua: no pub/sub rights, no error.
if KEYS[2] then
  redis.call('del', KEYS[2])
end
if redis.call('del', KEYS[1]) == 1 then
  redis.pcall('publish', KEYS[1] .. ':released', '1')
  return 1
end
return 0
