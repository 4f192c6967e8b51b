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

-- The server-side hand-off of a write. A writer that queues with the
-- `offers` key passed (a hash shared with a fair lock of the name, whose
-- hand-off never grants these entries, nor this one a lock's) leaves an
-- offer: owner -> `w<grant ms> <place deadline> <id>`, how long a grant
-- runs (the waiter lease, or the TTL if shorter), the deadline its place
-- got with it, and its attempt's hold id. The release that frees the lock
-- then grants the write to the first live writer's offer in the same
-- atomic step, so the writer learns it holds the lock from the message and
-- sends no acquire of its own.

-- rw_offer(offers, owner, id, now, lease, ttl): keeps `id` as the waiting
-- writer `owner`'s offer, made with the place's deadline `now + lease`
-- (rw_queue's). The offers vanish on their own with the queue.
local function rw_offer(offers, owner, id, now, lease, ttl)
  local runs = math.min(lease, ttl)
  redis.call('hset', offers, owner,
    string.format('w%d %d ', runs, now + lease) .. id)
  redis.call('pexpire', offers, lease * 2)
end

-- rw_void_offer(offers, id): drops the offer that names `id`, an attempt
-- whose hold is being given back (one whose reply was lost is released
-- before the writer's next attempt): no hand-off may grant it, since
-- nobody would take the grant up. The writer keeps its place; its next
-- attempt offers again. Nothing is written when `offers` is not a hash.
local function rw_void_offer(offers, id)
  if redis.call('type', offers)['ok'] ~= 'hash' then
    return
  end
  local owner = rw_owner(id)
  local offer = redis.call('hget', offers, owner)
  if offer and string.match(offer, '^w%d+ %d+ (.+)$') == id then
    redis.call('hdel', offers, owner)
  end
end

-- rw_hand_off(holds, modes, counter, queue, waiters, offers, now): when no
-- hold is live (the caller dropped the expired ones), drops the writers
-- whose place ran out from the head of the queue, and grants the write to
-- the first live one's offer: the next token of `counter` (INCR, the
-- counter kept without a TTL: offers are made only where grants issue
-- tokens so), the hold for the offer's lease and never past its place's
-- deadline (a writer that died after its last attempt blocks the lock no
-- longer than its place would have lasted; a live one extends to its TTL
-- at once), the writer out of the line, and `g<SHA-1 of its id>:<token>`
-- published (a digest: the id names the owner). Returns whether it
-- granted. A head without a current offer (it made none with its place's
-- last renewal), a key of another type or a counter INCR would refuse
-- grant nothing, and are written to by nothing: that writer takes its own
-- turn.
local function rw_hand_off(holds, modes, counter, queue, waiters, offers, now)
  if redis.call('zcard', holds) > 0 then
    return false
  end
  -- Nobody waits: two commands.
  if redis.call('type', queue)['ok'] ~= 'list' or not redis.call('lindex', queue, 0) then
    return false
  end
  if sem_foreign({counter, waiters, offers}, {'string', 'zset', 'hash'}) then
    return false
  end
  local last = redis.call('get', counter)
  if counter_problem(last) then
    return false
  end
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return false
    end
    local deadline = tonumber(redis.call('zscore', waiters, head))
    local offer = redis.call('hget', offers, head)
    if deadline and deadline > now then
      local runs, made_with, id
      if offer then
        runs, made_with, id = string.match(offer, '^w([1-9]%d*) (%d+) (.+)$')
      end
      if not runs or tonumber(made_with) ~= deadline or rw_owner(id) ~= head then
        return false
      end
      local token = token_text(next_token(counter, last, tonumber(runs), 0))
      redis.call('zadd', holds, now + math.min(tonumber(runs), deadline - now), id)
      redis.call('hset', modes, id, 'w:' .. token)
      rw_keep(holds, modes, counter, now)
      redis.call('lpop', queue)
      redis.call('zrem', waiters, head)
      redis.call('hdel', offers, head)
      redis.pcall('publish', holds .. ':released', 'g' .. redis.sha1hex(id) .. ':' .. token)
      return true
    end
    redis.call('lpop', queue)
    redis.call('zrem', waiters, head)
    if offer then
      redis.call('hdel', offers, head)
    end
  end
end
