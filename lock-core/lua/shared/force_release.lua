-- Deletes a lock whoever holds it (operators only), and tells waiters. The
-- fencing counter is kept, so tokens stay monotonic.
--
-- KEYS[1]  the lock key (a string, a hash or a lease set's sorted set,
--          whatever the strategy and the kind of hold)
-- KEYS[2..]  (optional) the keys that go with it: the holder information,
--          a lease set's entries and slots, a latch's counted-down ids, a
--          barrier's record, deleted with it (a lease set's tallies must not outlive its
--          holds, nor a latch's ids its count)
--
-- Reply: 1 when KEYS[1] was deleted, 0 when there was none.
-- The publish is a `pcall`, as in lock/release.lua: no pub/sub rights, no error.
if #KEYS > 1 then
  redis.call('del', unpack(KEYS, 2))
end
if redis.call('del', KEYS[1]) == 1 then
  redis.pcall('publish', KEYS[1] .. ':released', '1')
  return 1
end
return 0
