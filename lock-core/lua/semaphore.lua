-- Prepended to the semaphore scripts when they are loaded: the checks and
-- the clean-up every one of them starts with.
--
-- A semaphore's keys share its hash tag:
--   permits  a sorted set: permit id -> its deadline, in ms of the server's
--            clock (never a client's)
--   held     a hash: permit id -> `<weight>:<slot>:<token>`
--   limit    a string: the number of permits, which every process must agree on
--   fences   a hash: slot -> the last fencing token issued for that slot
-- A permit is live while its deadline is after the server's time; each
-- script first drops the permits that are not, so nothing expired ever
-- counts, and capacity is always computed from the live permits (a release
-- credits nothing but its own permit: a second release finds nothing).

-- sem_foreign(keys, types): the first of `keys` whose type is neither
-- `none` nor the one `types` names at the same index, as the reply
-- {-2, key, type}; nil when all are as expected. Nothing has been written.
local function sem_foreign(keys, types)
  for index, key in ipairs(keys) do
    local found = redis.call('type', key)['ok']
    if found ~= 'none' and found ~= types[index] then
      return {-2, key, found}
    end
  end
  return nil
end

-- sem_count(text): `text` as a whole number from 1 (at most 15 digits, so
-- exact as a Lua number), or nil.
local function sem_count(text)
  if type(text) ~= 'string' or not string.match(text, '^[1-9]%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?%d?$') then
    return nil
  end
  return tonumber(text)
end

-- sem_now(): the server's time in ms.
local function sem_now()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- sem_entry(text): the weight, slot and token of a `held` entry, or nil
-- when it is not `<weight>:<slot>:<token>`.
local function sem_entry(text)
  local weight, slot, token = string.match(text or '', '^(%d+):(%d+):(%d+)$')
  if not weight then
    return nil
  end
  return tonumber(weight), tonumber(slot), token
end

-- sem_read(permits, held, now): the live permits. First checks every entry,
-- writing nothing: returns nil and a {-2, key, detail} reply when an entry
-- does not parse or a permit has none. Then drops the permits whose
-- deadline is not after `now` and the entries of no permit, and returns a
-- table of id -> {weight, slot, token, deadline}, the live weight, and the
-- first live deadline (nil when none is live).
local function sem_read(permits, held, now)
  local scored = redis.call('zrange', permits, 0, -1, 'withscores')
  local entries = redis.call('hgetall', held)
  local parsed = {}
  for index = 1, #entries, 2 do
    local weight, slot, token = sem_entry(entries[index + 1])
    if not weight then
      return nil, {-2, held, 'an entry is not <weight>:<slot>:<token>'}
    end
    parsed[entries[index]] = {weight = weight, slot = slot, token = token}
  end
  local live, used, first, expired = {}, 0, nil, {}
  for index = 1, #scored, 2 do
    local id, deadline = scored[index], tonumber(scored[index + 1])
    local entry = parsed[id]
    if not entry then
      return nil, {-2, permits, 'a permit has no entry'}
    end
    if deadline <= now then
      expired[#expired + 1] = id
    else
      entry.deadline = deadline
      live[id] = entry
      used = used + entry.weight
      if not first or deadline < first then
        first = deadline
      end
    end
  end
  for _, id in ipairs(expired) do
    redis.call('zrem', permits, id)
  end
  for id in pairs(parsed) do
    if not live[id] then
      redis.call('hdel', held, id)
    end
  end
  return live, used, first
end

-- sem_keep(permits, held, now): gives both keys the expiry of the last
-- live permit, so an abandoned semaphore leaves nothing behind.
local function sem_keep(permits, held, now)
  local last = redis.call('zrange', permits, -1, -1, 'withscores')
  if last[2] then
    local left = tonumber(last[2]) - now
    if left > 0 then
      redis.call('pexpire', permits, left)
      redis.call('pexpire', held, left)
    end
  end
end
