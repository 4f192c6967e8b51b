-- Prepended, after rw/common.lua, to the scripts that read a read-write
-- lock's state.
--
-- rw_state(holds, held, counter, waiters): a read-write lock's state,
-- without changing it, as {epoch, waiting, mode, left_ms, token, ...}: the
-- counter's value (0 when none), how many writers wait with a live place,
-- then each live hold's mode (`r` or `w`), lease left and token, by
-- deadline; never an id. {-2, key, detail} when a key holds something that
-- is not this lock's.
local function rw_state(holds, held, counter, waiters)
  local foreign = ls_foreign({holds, held, counter, waiters}, {'zset', 'hash', 'string', 'zset'})
  if foreign then
    return foreign
  end
  local last = redis.call('get', counter)
  local problem = counter_problem(last)
  if problem then
    return {-2, counter, problem}
  end
  local now = ls_now()
  local live
  live, problem = rw_live(holds, held, now)
  if not live then
    return problem
  end
  local reply = {last or '0', redis.call('zcount', waiters, '(' .. now, '+inf')}
  for _, hold in ipairs(live) do
    reply[#reply + 1] = hold[2]
    reply[#reply + 1] = hold[4] - now
    reply[#reply + 1] = hold[3]
  end
  return reply
end
