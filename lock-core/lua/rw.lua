-- Prepended to the read-write lock scripts, after semaphore.lua (whose
-- helpers they share: argument checks, the server's time, and the drop of
-- expired holds from a sorted set and its hash), fencing_counter.lua and
-- grant.lua (the counter's check and how a write token is issued, as a
-- lock's grant issues it).
--
-- A read-write lock's keys share its hash tag:
--   holds    a sorted set: hold id (`<owner>:<nonce>`) -> its deadline, in
--            ms of the server's clock (never a client's)
--   modes    a hash: hold id -> `w:<token>` (exclusive, with its fencing
--            token) or `r:<epoch>` (shared, with the write epoch it read)
--   counter  a string: the last write token issued (shared with a plain
--            lock of the name), raised as grant.lua's next_token does: with
--            `fencing_counter_ttl`, from the server's time in µs, so tokens
--            keep growing after it expired; while a hold lives, a counter
--            with a TTL is kept at least as long
--   queue    a list of the owners of waiting writers, in arrival order
--   waiters  a sorted set: waiting writer -> its deadline by the server's
--            clock; a writer that does not try again within its waiter
--            lease leaves (the fair lock's queue keys, so leaving is the
--            same script)
-- A hold is live while its deadline is after the server's time; each script
-- drops the holds that are not before it writes, so an expired reader never
-- counts however many live readers renew, and a renewal never revives one.
-- The keys must not be evicted (`maxmemory-policy noeviction`): a live hold
-- whose entry is lost is reported as foreign data.

-- rw_entry(text): the mode (`r` or `w`) and token text of a `modes` entry,
-- or nil when it is not `r:<digits>` or `w:<digits>`.
local function rw_entry(text)
  local mode, token = string.match(text or '', '^([rw]):(%d+)$')
  if not mode or #token > 19 then
    return nil
  end
  return mode, token
end

-- rw_owner(id): the owner part of a hold id `<owner>:<16 hex digits>`.
local function rw_owner(id)
  return string.sub(id, 1, -18)
end

-- rw_live(holds, modes, now): the live holds, each {id, mode, token,
-- deadline}, or nil and a {-2, key, detail} reply. Reads only.
local function rw_live(holds, modes, now)
  local live = redis.call('zrangebyscore', holds, '(' .. now, '+inf', 'withscores')
  local found = {}
  for index = 1, #live, 2 do
    local mode, token = rw_entry(redis.call('hget', modes, live[index]))
    if not mode then
      return nil, {-2, modes, 'a live hold has no entry r:<epoch> or w:<token>'}
    end
    found[#found + 1] = {live[index], mode, token, tonumber(live[index + 1])}
  end
  return found
end

-- rw_keep(holds, modes, counter, now): gives the holds and their entries the
-- expiry of the last live hold, and a counter that has a TTL at least as
-- much, so no live read's epoch or write's token outlives its counter.
local function rw_keep(holds, modes, counter, now)
  sem_keep(holds, modes, now)
  local left = redis.call('pttl', holds)
  if counter and left > 0 then
    local counter_left = redis.call('pttl', counter)
    if counter_left > 0 and counter_left < left then
      redis.call('pexpire', counter, left)
    end
  end
end

-- rw_queue(queue, waiters, owner, now, lease): keeps `owner` queued among
-- the waiting writers for `lease` ms from `now`: at the back when it is new
-- or its place had run out (a stale place is not taken back), in its place
-- otherwise. The queue keys vanish on their own once every waiter is gone.
local function rw_queue(queue, waiters, owner, now, lease)
  local place = tonumber(redis.call('zscore', waiters, owner))
  if place and place <= now then
    redis.call('lrem', queue, 0, owner)
    place = nil
  end
  if not place then
    redis.call('rpush', queue, owner)
  end
  redis.call('zadd', waiters, now + lease, owner)
  redis.call('pexpire', queue, lease * 2)
  redis.call('pexpire', waiters, lease * 2)
end
