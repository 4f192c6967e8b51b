-- Prepended, after semaphore/common.lua, to the scripts that read a
-- semaphore's state.
--
-- sem_state(permits, held, limit): a semaphore's stored limit and its live
-- permits (those whose deadline is after the server's time; expired ones
-- are skipped, not dropped), without changing anything, as
-- {limit or 0, slot1, weight1, ms_left1, token1, slot2, ...}, the live
-- permits by slot, each token as text (never a permit's id, which is a
-- secret); {-2, key, detail} when a key holds something that is not this
-- semaphore's. The cost is in the number of permits.
local function sem_state(permits, held, limit_key)
  local foreign = ls_foreign({permits, held, limit_key}, {'zset', 'hash', 'string'})
  if foreign then
    return foreign
  end
  local stored = redis.call('get', limit_key)
  if stored and not ls_count(stored, 9) then
    return {-2, limit_key, 'the limit is not a whole number from 1'}
  end
  local now = ls_now()
  local live = redis.call('zrangebyscore', permits, '(' .. now, '+inf', 'withscores')
  local found = {}
  for index = 1, #live, 2 do
    local weight, slot, token = ls_permit(redis.call('hget', held, live[index]))
    if not weight then
      return {-2, held, 'a live permit has no entry <weight>:<slot>:<token>'}
    end
    found[#found + 1] = {slot, weight, tonumber(live[index + 1]) - now, token}
  end
  table.sort(found, function(a, b) return a[1] < b[1] end)
  local reply = {tonumber(stored) or 0}
  for _, permit in ipairs(found) do
    for _, field in ipairs(permit) do
      reply[#reply + 1] = field
    end
  end
  return reply
end
