-- Reads a read-write lock without changing it, after rw/state.lua, whose
-- rw_state says the reply.
--
-- KEYS[1]  the holds (a sorted set; see rw/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the write counter (a string)
-- KEYS[4]  the waiting writers' deadlines (a sorted set)
--
-- Reply: what rw_state returns.
if #KEYS < 4 then
  return redis.error_reply('ERR rw_inspect: four keys expected')
end
return rw_state(KEYS[1], KEYS[2], KEYS[3], KEYS[4])
