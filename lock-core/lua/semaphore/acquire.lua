-- Takes one permit of a weight in a semaphore of a limit, if that weight
-- fits beside the live permits: the permit gets the lowest slot no live
-- permit has, and the next fencing token of that slot. In fair mode (six
-- keys, or seven with the hand-off's offers), also only when the waiter queue is empty or headed by this owner,
-- so a large weight is not starved by small ones that keep fitting.
--
-- KEYS[1]  the permits (the lease set's sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the free slots (a sorted set; see lease_set/common.lua)
-- KEYS[4]  the limit (a string)
-- KEYS[5]  the slots' fencing counters (a hash)
-- KEYS[6]  (fair mode) the waiter queue, a list of owners, as fair/acquire.lua
-- KEYS[7]  (fair mode) the waiters' deadlines, a zset by the server's clock
-- ARGV[1]  the permit id, `<owner>:<nonce>`
-- ARGV[2]  the weight, at least 1 and at most the limit
-- ARGV[3]  the limit, from 1 to 999,999,999
-- ARGV[4]  the TTL in ms
-- ARGV[5]  (fair mode) the owner: the waiter's place in the queue
-- ARGV[6]  (fair mode) the waiter lease in ms: a waiter that does not try
--          again within it leaves the queue
-- ARGV[7]  (fair mode) "1" to join the queue when it is not this owner's
--          turn or the weight does not fit, "0" to try once
-- KEYS[8], ARGV[8]  (fair mode, optional: the server-side hand-off,
--          semaphore/common.lua) the waiters' offers, and the permit id this
--          waiter's previous attempt offered, or '-': a waiter that queues
--          offers this attempt's id, for a release to grant
--
-- Reply:
--   {1, slot, token}     granted (the token as text), with a deadline of the
--                        TTL from now; for an id already live (a retried
--                        attempt), its own slot and token, its deadline set
--                        again to the TTL from now
--   {0, used, wait_ms}   the weight does not fit, or (fair mode) an earlier
--                        waiter is first: `used` is the weight of the live
--                        permits, `wait_ms` how long until the first of them
--                        ends (-1 when none is live); only expired permits
--                        and dead waiters were removed, and this owner
--                        queued if asked (with KEYS[8], its offer kept)
--   {-1, limit}          the semaphore was created with another limit, which
--                        it keeps: nothing was written
--   {-2, key, detail}    a key holds something that is not this semaphore's
--                        (another type, or an entry, limit or counter that
--                        does not parse): nothing was written
--   {-3, limit}          the weight is above the limit: it can never fit;
--                        nothing was written
--   {3, slot, token}     (with ARGV[8]) a release already granted the
--                        previous attempt's offer this permit; it now lives
--                        for the TTL and nothing else was written: the
--                        waiter holds it from this attempt on
-- Missing KEYS, or an ARGV that is not a whole number from 1, is an error
-- reply before anything is read. Every check comes before the first write;
-- TIME is read before it too, so a user whose ACL refuses it writes nothing.
-- The cost does not grow with the live permits: the weight in use and the
-- free slots are the lease set's tallies; expired permits are swept as
-- lease_set/common.lua says, and in fair mode the dead waiters drop from the
-- head. A grant that takes the
-- queue's head publishes on `KEYS[1]:released` when others wait behind it,
-- so the next in line tries at once rather than at its timer.
if #KEYS < 5 then
  return redis.error_reply('ERR semaphore_acquire: five keys expected')
end
local permits, held, slots, limit_key, fences = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local id = ARGV[1]
local weight, limit, ttl = ls_count(ARGV[2], 9), ls_count(ARGV[3], 9), ls_count(ARGV[4], 14)
if not (id and weight and limit and ttl) then
  return redis.error_reply('ERR semaphore_acquire: the weight, limit and TTL must be whole numbers from 1')
end
local queue, waiters = KEYS[6], KEYS[7]
local owner, lease, join = ARGV[5], ls_count(ARGV[6], 14), ARGV[7] == '1'
if queue and not (waiters and owner and lease) then
  return redis.error_reply('ERR semaphore_acquire: fair mode takes seven keys, an owner and a waiter lease')
end
local offers, earlier = KEYS[8], ARGV[8] or '-'
local now = ls_now()
local ids = {id}
if earlier ~= '-' then
  ids[2] = earlier
end
-- Another kind's hold of the name: a lock's string or a reentrant lock's
-- hash at `permits` (its PTTL), or a read-write lock's live holds in the
-- lease set. Its keys are not this semaphore's, so only the limit, the
-- fences and the line are checked.
local ls, other, problem = ls_open_as('p', permits, held, slots, now, ids)
if problem then
  return problem
end
local stored, foreign = ls_read(limit_key, 'get')
if foreign then
  return foreign
end
foreign = (queue and ls_foreign({queue, waiters}, {'list', 'zset'}))
  or (queue and offers and ls_foreign({offers}, {'hash'}))
if foreign then
  return foreign
end
if stored then
  if not ls_count(stored, 9) then
    return {-2, limit_key, 'the limit is not a whole number from 1'}
  end
  if tonumber(stored) ~= limit then
    return {-1, tonumber(stored)}
  end
end
if weight > limit then
  return {-3, limit}
end
if other then
  foreign = ls_foreign({fences}, {'hash'})
  if foreign then
    return foreign
  end
  -- Held by another kind: a fair waiter keeps its place (and its offer,
  -- which no other kind's hand-off grants), so readers and later waiters
  -- stay behind it.
  if queue and join then
    line_join(queue, waiters, owner, now, lease)
    if offers then
      sem_offer(offers, owner, id, weight, now, lease, ttl)
    end
  end
  -- Nothing of the other kind's is written, its expired holds neither.
  return {0, 0, other}
end
-- renewed(hold, code): the live permit `hold` of this waiter renewed for
-- the TTL, as {code, slot, token}; nil when `hold` is not live.
local function renewed(hold, code)
  if not ls_deadline(ls, hold) then
    return nil
  end
  local _, slot, token = ls_permit(ls.entries[hold])
  if not slot then
    return {-2, held, 'a live permit has no entry <weight>:<slot>:<token>'}
  end
  ls_add(ls, hold, now + ttl)
  ls_close(ls)
  return {code, slot, token}
end
-- A retried attempt: its own permit, renewed. An attempt that takes up
-- the grant a release made to its earlier one's offer: the grant ran for
-- the waiter lease, and now runs for the TTL from this attempt.
local again = renewed(id, 1)
  or (queue and offers and earlier ~= '-' and owner and line_owner(earlier) == owner
    and renewed(earlier, 3))
if again then
  return again
end
-- A refusal counts no expired permit, and in fair mode the reply's weight
-- in use neither.
if ls.weight + weight > limit or queue then
  problem = ls_settle(ls)
  if problem then
    return problem
  end
end
-- The slot a grant would take, and its counter checked, before any write.
local slot = ls_slot(ls)
local last, wrong = ls_read(fences, 'hget', slot)
if wrong then
  return wrong
end
if last and (not string.match(last, '^%d+$') or #last > 18) then
  return {-2, fences, 'the counter of slot ' .. slot .. ' is not a number below 10^18'}
end
local head = nil
if queue then
  -- Waiters whose lease ran out leave from the head, so none blocks the rest.
  head = line_head(queue, waiters, offers, now)
end
if ls.weight + weight > limit or (head and head ~= owner) then
  if queue and join then
    line_join(queue, waiters, owner, now, lease)
    if offers then
      sem_offer(offers, owner, id, weight, now, lease, ttl)
    end
  end
  local first = ls_first(ls)
  ls_close(ls)
  return {0, ls.weight, first and (first - now) or -1}
end
ls_drop_swept(ls)
local token = redis.call('hincrby', fences, slot, 1)
if token >= 9007199254740992 then
  -- As text: a double would round it.
  token = redis.call('hget', fences, slot)
end
token = tostring(token)
ls_add(ls, id, now + ttl, ARGV[2] .. ':' .. slot .. ':' .. token)
if not stored then
  redis.call('set', limit_key, ARGV[3])
end
ls_close(ls)
if queue and offers then
  redis.call('hdel', offers, owner)
end
if head then
  redis.call('lpop', queue)
  redis.call('zrem', waiters, owner)
  if redis.call('llen', queue) > 0 then
    redis.pcall('publish', permits .. ':released', 0)
  end
end
return {1, slot, token}
