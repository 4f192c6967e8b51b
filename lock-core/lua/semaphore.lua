-- Prepended to the semaphore scripts when they are loaded: the checks and
-- the clean-up every one of them starts with.
--
-- A semaphore's keys share its hash tag:
--   permits  a sorted set: permit id -> its deadline, in ms of the server's
--            clock (never a client's)
--   held     a hash: permit id -> `<weight>:<slot>:<token>`
--   limit    a string: the number of permits, which every process must agree
--            on; kept without a TTL (changing it is an explicit operation)
--   fences   a hash: slot -> the last fencing token issued for that slot;
--            kept without a TTL, so a slot's tokens only grow
-- A permit is live while its deadline is after the server's time; each
-- script first drops the permits that are not, so nothing expired ever
-- counts, and capacity is computed from the live permits (a release credits
-- nothing but its own permit: a second release finds nothing). The keys
-- must not be evicted (`maxmemory-policy noeviction`): a permit whose entry
-- is lost while it lives is reported as foreign data.

-- sem_count(text, digits): `text` as a whole number from 1 with at most
-- `digits` digits, or nil.
local function sem_count(text, digits)
  if type(text) ~= 'string' or #text > digits or not string.match(text, '^[1-9]%d*$') then
    return nil
  end
  return tonumber(text)
end

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

-- sem_expired(permits, held, now): the ids of the permits whose deadline is
-- not after `now`, and the weight their entries had. Reads only; the cost is
-- in the number of expired permits.
local function sem_expired(permits, held, now)
  local expired = redis.call('zrangebyscore', permits, '-inf', now)
  local weight = 0
  for _, id in ipairs(expired) do
    weight = weight + (sem_entry(redis.call('hget', held, id)) or 0)
  end
  return expired, weight
end

-- sem_drop(permits, held, ids): removes the permits `ids` and their entries.
local function sem_drop(permits, held, ids)
  for _, id in ipairs(ids) do
    redis.call('zrem', permits, id)
    redis.call('hdel', held, id)
  end
end

-- sem_open(permits, held): what renew and release start with, after their
-- own argument checks: the keys' types checked, the server's time read,
-- and the expired permits dropped. Returns the time and the weight the
-- expired permits had, or nil and a {-2, key, type} reply (nothing written).
local function sem_open(permits, held)
  local foreign = sem_foreign({permits, held}, {'zset', 'hash'})
  if foreign then
    return nil, foreign
  end
  local now = sem_now()
  local expired, freed = sem_expired(permits, held, now)
  sem_drop(permits, held, expired)
  return now, freed
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
