-- Reads a latch without changing anything.
--
-- KEYS[1]  the latch: `L<count>/<initial>` at the name's main key
--          (latch/state.lua)
-- KEYS[2]  the ids that counted down (a hash)
--
-- Reply: {count, initial, pttl} (pttl in ms, -1 when the key has no
-- expiry); {} when no latch is set; {-3, kind} when another primitive
-- holds the name, {-2, key, detail} when a key holds another type
-- (latch/state.lua's latch_open).
if #KEYS < 2 then
  return redis.error_reply('ERR latch_read: two keys expected')
end
local count, _, problem = latch_open(KEYS[1], KEYS[2])
if problem then
  return problem
end
if not count then
  return {}
end
return latch_state(KEYS[1])
