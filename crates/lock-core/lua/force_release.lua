-- Deletes a lock whoever holds it (operators only), and tells waiters. The
-- fencing counter is kept, so tokens stay monotonic.
--
-- KEYS[1]  the lock key (a string or a hash, whatever the strategy)
--
-- Reply: 1 when a key was deleted, 0 when there was none.
if redis.call('del', KEYS[1]) == 1 then
  redis.call('publish', KEYS[1] .. ':released', '1')
  return 1
end
return 0
