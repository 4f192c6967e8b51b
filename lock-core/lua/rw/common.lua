-- Prepended to the read-write lock scripts, after shared/queue.lua (the
-- writers' line), lease_set/common.lua (the holds), semaphore/common.lua,
-- shared/fencing_counter.lua and shared/grant.lua (the counter's check and
-- how a write token is issued, as a lock's grant issues it).
--
-- A read-write lock's holds are holds of the name's lease set
-- (lease_set/common.lua): `holds` its sorted set, `held` its hash, whose
-- entries are `w:<token>` (exclusive, with its fencing token) or
-- `r:<epoch>` (shared, with the write epoch it read), and whose tallies
-- count the reads and writes in all and each owner's, so a grant reads
-- no hold but its own. More keys share the hash tag:
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
-- A hold is live while its deadline is after the server's time; expired
-- holds are swept (lease_set/common.lua), so an expired reader never counts
-- however many live readers renew, and a renewal never revives one. The
-- keys must not be evicted (`maxmemory-policy noeviction`).

-- rw_live(holds, held, now): the live holds, each {id, mode, token,
-- deadline}, or nil and a {-2, key, detail} reply. Reads only; the cost is
-- in the live holds (for reading the state, never for a grant).
local function rw_live(holds, held, now)
  local live = redis.call('zrangebyscore', holds, '(' .. now, '+inf', 'withscores')
  local found = {}
  for index = 1, #live, 2 do
    local mode, token = ls_mode(redis.call('hget', held, live[index]))
    if not mode then
      return nil, {-2, held, 'a live hold has no entry r:<epoch> or w:<token>'}
    end
    found[#found + 1] = {live[index], mode, token, tonumber(live[index + 1])}
  end
  return found
end

-- rw_counter_outlives(ls, counter): a counter that has a TTL gets at least
-- the last hold's time left, so no live read's epoch or write's token
-- outlives its counter.
local function rw_counter_outlives(ls, counter)
  local left = ls.last - ls.now
  if counter and ls.n > 0 and left > 0 then
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

-- rw_hand_off(ls, counter, queue, waiters, offers): when no hold is live
-- (of any kind: the lease set swept to its live holds), drops the writers
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
local function rw_hand_off(ls, counter, queue, waiters, offers)
  if ls.n > 0 then
    if ls_settle(ls) or ls.n > 0 then
      return false
    end
  end
  -- Nobody waits: two commands (shared/queue.lua).
  if not line_waiting(queue, waiters, offers) or ls_foreign({counter}, {'string'}) then
    return false
  end
  local last = redis.call('get', counter)
  if counter_problem(last) then
    return false
  end
  local now = ls.now
  local head, deadline = line_head(queue, waiters, offers, now)
  if not head then
    return false
  end
  local runs, id = line_offer(offers, head, deadline, 'w')
  if not runs then
    return false
  end
  ls_drop_swept(ls)
  local token = token_text(next_token(counter, last, runs, 0))
  ls_add(ls, id, now + math.min(runs, deadline - now), 'w:' .. token)
  line_take(queue, waiters, offers, head)
  redis.pcall('publish', ls.set .. ':released', 'g' .. redis.sha1hex(id) .. ':' .. token)
  return true
end
