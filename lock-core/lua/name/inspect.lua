-- Reads what a name is, in one script, without changing anything: a lock
-- (or an election's), a semaphore, a read-write lock, a latch, or nothing.
-- Loaded after the files whose state functions it calls (lock/state.lua,
-- semaphore/state.lua, rw/state.lua, election/state.lua, latch/state.lua,
-- barrier/state.lua) and their helpers.
-- A name is held by one kind at a time (every kind's grant refuses beside
-- another's), so the type of its main key says which kind to read.
--
-- KEYS[1]  the name's main key: a lock's or a latch's string, or the
--          sorted set of a semaphore's permits or of a read-write lock's
--          holds
-- KEYS[2]  the fencing counter (a read-write lock's write epoch too)
-- KEYS[3]  the holder information (a hash; shown as lock/state.lua says)
-- KEYS[4]  the lease set's entries: a semaphore's permits' or a
--          read-write lock's holds' (a hash)
-- KEYS[5]  a semaphore's limit (a string)
-- KEYS[6]  a read-write lock's waiting writers (a sorted set)
-- KEYS[7]  an election's leader record (a string)
-- KEYS[8]  a barrier's record (a string)
--
-- Reply, by kind (the first field):
--   {'lock', pttl, counter, holder, term, value}: lock_state's reply (a pttl
--       of -2 when nothing holds the name) and election_leader's term and
--       value (false when no leader proclaimed for the lock's term)
--   {'semaphore', ...sem_state's reply}: the main key is a semaphore's, or
--       there is none and a limit is stored
--   {'rw', ...rw_state's reply}: the main key's holds are a read-write
--       lock's
--   {'latch', count, initial, pttl}: latch_state's reply
--   {'barrier', ...barrier_state's reply}: the main key's holds are a
--       barrier's parties
--   {-1, detail} or {-2, key, detail}: a key holds something that is not
--       the kind its main key says (the state functions' own replies), or
--       the main key is of a type no primitive writes (a list, a set)
if #KEYS < 8 then
  return redis.error_reply('ERR name_inspect: eight keys expected')
end
local main, counter, holder, held, limit, waiters, record, barrier =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]

-- tagged(kind, reply): `reply` with `kind` in front; a state function's
-- {-2, key, detail} as it is.
local function tagged(kind, reply)
  if reply[1] == -2 then
    return reply
  end
  table.insert(reply, 1, kind)
  return reply
end

local found = redis.call('type', main)['ok']
-- A lock's string, a reentrant lock's hash, or a sorted set of holds: any
-- other type is no primitive's.
if found ~= 'none' and found ~= 'string' and found ~= 'hash' and found ~= 'zset' then
  return {-2, main, found}
end
if found == 'zset' then
  -- The hold with the latest deadline says whose sorted set it is: a
  -- read-write hold's entry is `r:` or `w:`; anything else is read as a
  -- semaphore's, whose own check reports a live permit without an entry.
  local last = redis.call('zrange', main, -1, -1)[1]
  local entry = last and redis.call('type', held)['ok'] == 'hash'
    and redis.call('hget', held, last)
  if entry and ls_mode(entry) then
    return tagged('rw', rw_state(main, held, counter, waiters))
  end
  if entry and ls_party(entry) then
    return tagged('barrier', barrier_state(main, held, barrier, '', ls_now()))
  end
  return tagged('semaphore', sem_state(main, held, limit))
end
if found == 'none' and redis.call('exists', limit) == 1 then
  return tagged('semaphore', sem_state(main, held, limit))
end
if found == 'string' and latch_parse(redis.call('get', main)) then
  return tagged('latch', latch_state(main))
end
local lock = lock_state(main, counter, holder)
local term, value = '', false
if found == 'string' then
  local leader = election_leader(main, record)
  if leader[1] == -1 then
    return leader
  end
  term, value = leader[2], leader[3]
end
return {'lock', lock[1], lock[2], lock[3], term, value}
