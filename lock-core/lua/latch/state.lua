-- Prepended to the latch scripts and name/inspect.lua: the latch's value
-- and its read. A latch is a string at the name's main key,
-- `L<count>/<initial>`, with the latch's TTL; a lock's value always has a
-- `:` in it, so the two never read as each other.

-- latch_parse(text): the count and the initial count of a latch's value,
-- or nil when `text` is not one.
local function latch_parse(text)
  if type(text) ~= 'string' then
    return nil
  end
  local count, initial = string.match(text, '^L(%d+)/(%d+)$')
  if not count or #count > 9 or #initial > 9 then
    return nil
  end
  count, initial = tonumber(count), tonumber(initial)
  if count > initial then
    return nil
  end
  return count, initial
end

-- latch_open(main, downs): the latch at `main`, read before anything is
-- written: its count and initial count, or nil when there is none; or nil,
-- nil and the reply to give: {-3, 'lock'} when `main` holds a lock's
-- string or a reentrant lock's hash, {-3, 'zset'} when it holds a
-- semaphore's or read-write lock's holds, {-2, key, detail} when it holds
-- another type or `downs` (the counted-down ids) is not a hash.
local function latch_open(main, downs)
  local found = redis.call('type', main)['ok']
  if found == 'hash' then
    return nil, nil, {-3, 'lock'}
  end
  if found == 'zset' then
    return nil, nil, {-3, 'zset'}
  end
  if found ~= 'none' and found ~= 'string' then
    return nil, nil, {-2, main, found}
  end
  found = redis.call('type', downs)['ok']
  if found ~= 'none' and found ~= 'hash' then
    return nil, nil, {-2, downs, found}
  end
  local stored = redis.call('get', main)
  if not stored then
    return nil
  end
  local count, initial = latch_parse(stored)
  if not count then
    return nil, nil, {-3, 'lock'}
  end
  return count, initial
end

-- latch_state(main): {count, initial, pttl} of the latch at `main`, read
-- only, as latch/read.lua replies.
local function latch_state(main)
  local count, initial = latch_parse(redis.call('get', main))
  return {count, initial, redis.call('pttl', main)}
end
