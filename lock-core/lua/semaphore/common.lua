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

-- sem_held_by_other(main, companion): how long (ms; -1 for no expiry)
-- another kind's hold on the name whose main key is `main` lasts, or nil
-- when the name is free or this kind's. Another kind is a lock's string, a
-- reentrant lock's hash (their PTTL), or a sorted set with a live hold
-- whose last one has no entry in `companion`, the hash in which every hold
-- of this kind has one (a semaphore's `held` beside a read-write lock's
-- `modes`; a companion left behind by a forced release or a `DEL` of the
-- sorted set names no hold of the other kind). A sorted set whose holds
-- all ended is nobody's. A name held by one kind is held for every other,
-- and nothing of it is written. A companion of another type is left to
-- sem_foreign to report. Reads only.
local function sem_held_by_other(main, companion)
  local kind = redis.call('type', main)['ok']
  if kind == 'string' or kind == 'hash' then
    return redis.call('pttl', main)
  end
  if kind ~= 'zset' then
    return nil
  end
  local last = redis.call('zrange', main, -1, -1, 'withscores')
  local left = tonumber(last[2]) - sem_now()
  if left <= 0 then
    return nil
  end
  local found = redis.call('type', companion)['ok']
  if found == 'hash' then
    if redis.call('hexists', companion, last[1]) == 1 then
      return nil
    end
  elseif found ~= 'none' then
    return nil
  end
  return left
end

-- sem_leave_beside_other(main, queue, waiters, offers, owner): the give-up
-- of a waiter whose name another kind holds (sem_held_by_other): nothing of
-- ours to give back, only the place and its offer, and those behind it are
-- told ('0' on `main`'s channel) when it had one. The reply {removed, 0},
-- or {-2, key, type} for a line key of another type (nothing written).
local function sem_leave_beside_other(main, queue, waiters, offers, owner)
  local foreign = sem_foreign({queue, waiters, offers}, {'list', 'zset', 'hash'})
  if foreign then
    return foreign
  end
  redis.call('hdel', offers, owner)
  redis.call('zrem', waiters, owner)
  local removed = redis.call('lrem', queue, 0, owner)
  if removed > 0 then
    redis.pcall('publish', main .. ':released', '0')
  end
  return {removed, 0}
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
-- expired permits had, or nil and a {-2, key, type} reply (nothing written),
-- or nil and 0 (not held; nothing written) when another kind holds the
-- name (sem_held_by_other): a stale holder's renewal or release must not
-- drop the other kind's holds.
local function sem_open(permits, held)
  if sem_held_by_other(permits, held) then
    return nil, 0
  end
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

-- The server-side hand-off of permits in fair mode. A waiter that queues
-- with the `offers` key passed (a hash shared with a fair lock's and a
-- read-write lock's waiters, whose hand-offs never grant these entries, nor
-- this one theirs) leaves an offer: owner -> `p<weight> <grant ms> <place
-- deadline> <id>`, the weight it asks for, how long a grant runs (the
-- waiter lease, or the TTL if shorter), the deadline its place got with
-- it, and its attempt's permit id. A release then grants permits to the
-- waiters at the head of the line, in order, while their weights fit.

-- sem_offer(offers, owner, id, weight, now, lease, ttl): keeps `id` as the
-- waiter `owner`'s offer, made with its place's deadline `now + lease`.
local function sem_offer(offers, owner, id, weight, now, lease, ttl)
  line_keep_offer(offers, owner,
    string.format('p%d %d %d ', weight, math.min(lease, ttl), now + lease) .. id, lease)
end

-- sem_hand_off(permits, held, limit_key, fences, queue, waiters, offers,
-- now): drops the waiters whose place ran out from the head of the line,
-- then grants each live waiter at the head its offer while its weight fits
-- beside the live permits: the lowest free slot and its next token, the
-- permit for the offer's lease and never past its place's deadline (a
-- waiter that died after its last attempt holds it no longer than its
-- place would have lasted; a live one extends it to its TTL at once), the
-- waiter out of the line, and `g<SHA-1 of the id>:<token>:<slot>`
-- published. Stops at a head whose weight does not fit (fair: none passes
-- it) or that has no current offer (it takes its own turn). Returns the
-- weight granted, and true when it stopped at a live head it could not
-- grant for want of an offer or a readable counter (that head must be
-- woken to take its own turn). Reads only the queue when nobody waits.
-- Writes nothing when a key holds another type or a live permit's entry or
-- the limit does not parse; a slot counter that does not parse stops it
-- after the grants and dead heads before, which stand.
local function sem_hand_off(permits, held, limit_key, fences, queue, waiters, offers, now)
  if not line_waiting(queue, waiters, offers) or sem_foreign({limit_key, fences}, {'string', 'hash'}) then
    return 0
  end
  local limit = sem_count(redis.call('get', limit_key), 9)
  if not limit then
    return 0
  end
  local used, taken = 0, {}
  for _, live in ipairs(redis.call('zrangebyscore', permits, '(' .. now, '+inf')) do
    local weight, slot = sem_entry(redis.call('hget', held, live))
    if not weight then
      return 0
    end
    used = used + weight
    taken[slot] = true
  end
  local granted, stalled = 0, false
  while true do
    local head, deadline = line_head(queue, waiters, offers, now)
    if not head then
      break
    end
    local runs, id, weight = line_offer(offers, head, deadline, 'p')
    if not runs then
      stalled = true
      break
    end
    if used + weight > limit then
      break
    end
    local slot = 0
    while taken[slot] do
      slot = slot + 1
    end
    local last = redis.call('hget', fences, slot)
    if last and (not string.match(last, '^%d+$') or #last > 18) then
      stalled = true
      break
    end
    redis.call('hincrby', fences, slot, 1)
    local token = redis.call('hget', fences, slot)
    redis.call('zadd', permits, now + math.min(runs, deadline - now), id)
    redis.call('hset', held, id, weight .. ':' .. slot .. ':' .. token)
    used = used + weight
    granted = granted + weight
    taken[slot] = true
    line_take(queue, waiters, offers, head)
    redis.pcall('publish', permits .. ':released', 'g' .. redis.sha1hex(id) .. ':' .. token .. ':' .. slot)
  end
  if granted > 0 then
    sem_keep(permits, held, now)
  end
  return granted, stalled
end
