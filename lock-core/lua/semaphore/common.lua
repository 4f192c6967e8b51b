-- Prepended, after shared/queue.lua and lease_set/common.lua, to the
-- semaphore scripts.
--
-- A semaphore's permits are holds of the name's lease set
-- (lease_set/common.lua): `permits` its sorted set, `held` its hash (a
-- permit's entry `<weight>:<slot>:<token>`; the weight in use is the
-- `:weight` tally) and `slots` its free slots. Two more
-- keys share the hash tag:
--   limit    a string: the number of permits, which every process must agree
--            on; kept without a TTL (changing it is an explicit operation)
--   fences   a hash: slot -> the last fencing token issued for that slot;
--            kept without a TTL, so a slot's tokens only grow
-- A permit is live while its deadline is after the server's time; expired
-- permits are swept (lease_set/common.lua), so nothing expired ever counts
-- against a grant, and a release credits nothing but its own permit: a
-- second release finds nothing. The keys must not be evicted
-- (`maxmemory-policy noeviction`).

-- sem_leave_beside_other(main, queue, waiters, offers, owner): the give-up
-- of a waiter whose name another kind holds: nothing of ours to give back,
-- only the place and its offer, and those behind it are told ('0' on
-- `main`'s channel) when it had one. The reply {removed, 0}, or {-2, key,
-- type} for a line key of another type (nothing written).
local function sem_leave_beside_other(main, queue, waiters, offers, owner)
  local foreign = ls_foreign({queue, waiters, offers}, {'list', 'zset', 'hash'})
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

-- sem_hand_off(ls, limit_key, fences, queue, waiters, offers): drops the
-- waiters whose place ran out from the head of the line, then grants each
-- live waiter at the head its offer while its weight fits beside the
-- permits (the `:weight` tally of the lease set `ls`, swept to the live
-- ones before a head is refused): the lowest free slot and its next token,
-- the permit for the offer's lease and never past its place's deadline (a
-- waiter that died after its last attempt holds it no longer than its
-- place would have lasted; a live one extends it to its TTL at once), the
-- waiter out of the line, and `g<SHA-1 of the id>:<token>:<slot>`
-- published. Stops at a head whose weight does not fit (fair: none passes
-- it) or that has no current offer (it takes its own turn). Returns the
-- weight granted, and true when it stopped at a live head it could not
-- grant for want of an offer or a readable counter (that head must be
-- woken to take its own turn). Reads only the queue when nobody waits.
-- Grants nothing beside another kind's live holds, or when a key holds
-- another type or the limit does not parse; a slot counter that does not
-- parse stops it after the grants and dead heads before, which stand.
local function sem_hand_off(ls, limit_key, fences, queue, waiters, offers)
  local now = ls.now
  if not line_waiting(queue, waiters, offers) or ls_foreign({limit_key, fences}, {'string', 'hash'}) then
    return 0
  end
  local limit = ls_count(redis.call('get', limit_key), 9)
  local other, problem = ls_in_way(ls, 'p')
  if not limit or other or problem then
    return 0
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
    if ls.weight + weight > limit then
      if ls_settle(ls) or ls.weight + weight > limit then
        break
      end
    end
    local slot = ls_slot(ls)
    local last = redis.call('hget', fences, slot)
    if last and (not string.match(last, '^%d+$') or #last > 18) then
      stalled = true
      break
    end
    ls_drop_swept(ls)
    redis.call('hincrby', fences, slot, 1)
    local token = redis.call('hget', fences, slot)
    ls_add(ls, id, now + math.min(runs, deadline - now), weight .. ':' .. slot .. ':' .. token)
    granted = granted + weight
    line_take(queue, waiters, offers, head)
    redis.pcall('publish', ls.set .. ':released', 'g' .. redis.sha1hex(id) .. ':' .. token .. ':' .. slot)
  end
  return granted, stalled
end
