-- Deletes a latch, whatever its count, and the ids that counted it down;
-- only a latch: a name another primitive holds is left as it is.
--
-- KEYS[1]  the latch: `L<count>/<initial>` at the name's main key
--          (latch/state.lua)
-- KEYS[2]  the ids that counted down (a hash)
--
-- Reply (the 0 path writes and deletes the ids' key, so that a WAIT after
-- a retried delete covers the first call's): 1 when a latch was deleted (and published on `KEYS[1]:released`,
-- where every other kind's waiters listen: the name is free), 0 when none
-- was set; {-3, kind} when another primitive holds the name, {-2, key,
-- detail} when a key holds another type (latch/state.lua's latch_open;
-- nothing written).
-- The latch's own waiters read no latch, and wait for one set again.
if #KEYS < 2 then
  return redis.error_reply('ERR latch_delete: two keys expected')
end
local count, _, problem = latch_open(KEYS[1], KEYS[2])
if problem then
  return problem
end
redis.call('del', KEYS[2])
if not count then
  -- A write all the same (of nothing that stays), so a WAIT after a retry
  -- covers the first call's delete.
  redis.call('hset', KEYS[2], '', '1')
  redis.call('del', KEYS[2])
  return 0
end
redis.call('del', KEYS[1])
redis.pcall('publish', KEYS[1] .. ':released', '1')
return 1
