-- Reads a semaphore without changing it, after semaphore/state.lua, whose
-- sem_state says the reply.
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries (a hash)
-- KEYS[3]  the limit (a string)
--
-- Reply: what sem_state returns.
if #KEYS < 3 then
  return redis.error_reply('ERR semaphore_inspect: three keys expected')
end
return sem_state(KEYS[1], KEYS[2], KEYS[3])
