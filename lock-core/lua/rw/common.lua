-- Prepended to the read-write lock scripts, after shared/queue.lua (the writers'
-- line), semaphore/common.lua (whose
-- helpers they share: argument checks, the server's time, and the drop of
-- expired holds from a sorted set and its hash), shared/fencing_counter.lua and
-- shared/grant.lua (the counter's check and how a write token is issued, as a
-- lock's grant issues it).
--
-- A read-write lock's keys share its hash tag:
--   holds    a sorted set: hold id (`<owner>:<nonce>`) -> its deadline, in
--            ms of the server's clock (never a client's)
--   modes    a hash: hold id -> `w:<token>` (exclusive, with its fencing
--            token) or `r:<epoch>` (shared, with the write epoch it read)
--   counter  a string: the last write token issued (shared with a plain
--            lock of the name), raised as shared/grant.lua's next_token does: with
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
-- (shared/queue.lua's line_join).
local function rw_offer(offers, owner, id, now, lease, ttl)
  line_keep_offer(offers, owner, string.format('w%d %d ', math.min(lease, ttl), now + lease) .. id, lease)
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
  -- Nobody waits: two commands (shared/queue.lua).
  if not line_waiting(queue, waiters, offers) or sem_foreign({counter}, {'string'}) then
    return false
  end
  local last = redis.call('get', counter)
  if counter_problem(last) then
    return false
  end
  local head, deadline = line_head(queue, waiters, offers, now)
  if not head then
    return false
  end
  local runs, id = line_offer(offers, head, deadline, 'w')
  if not runs then
    return false
  end
  local token = token_text(next_token(counter, last, runs, 0))
  redis.call('zadd', holds, now + math.min(runs, deadline - now), id)
  redis.call('hset', modes, id, 'w:' .. token)
  rw_keep(holds, modes, counter, now)
  line_take(queue, waiters, offers, head)
  redis.pcall('publish', holds .. ':released', 'g' .. redis.sha1hex(id) .. ':' .. token)
  return true
end
