-- Takes one permit of a weight in a semaphore of a limit, if that weight
-- fits beside the live permits: the permit gets the lowest slot no live
-- permit has, and the next fencing token of that slot. In fair mode (six
-- keys, or seven with the hand-off's offers), also only when the waiter queue is empty or headed by this owner,
-- so a large weight is not starved by small ones that keep fitting.
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries (a hash)
-- KEYS[3]  the limit (a string)
-- KEYS[4]  the slots' fencing counters (a hash)
-- KEYS[5]  (fair mode) the waiter queue, a list of owners, as fair/acquire.lua
-- KEYS[6]  (fair mode) the waiters' deadlines, a zset by the server's clock
-- ARGV[1]  the permit id, `<owner>:<nonce>`
-- ARGV[2]  the weight, at least 1 and at most the limit
-- ARGV[3]  the limit, from 1 to 999,999,999
-- ARGV[4]  the TTL in ms
-- ARGV[5]  (fair mode) the owner: the waiter's place in the queue
-- ARGV[6]  (fair mode) the waiter lease in ms: a waiter that does not try
--          again within it leaves the queue
-- ARGV[7]  (fair mode) "1" to join the queue when it is not this owner's
--          turn or the weight does not fit, "0" to try once
-- KEYS[7], ARGV[8]  (fair mode, optional: the server-side hand-off,
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
--                        queued if asked (with KEYS[7], its offer kept)
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
-- The cost is in the number of live permits (at most the limit), and in
-- fair mode the dead waiters dropped from the head. A grant that takes the
-- queue's head publishes on `KEYS[1]:released` when others wait behind it,
-- so the next in line tries at once rather than at its timer.
if #KEYS < 4 then
  return redis.error_reply('ERR semaphore_acquire: four keys expected')
end
local permits, held, limit_key, fences = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local weight, limit, ttl = sem_count(ARGV[2], 9), sem_count(ARGV[3], 9), sem_count(ARGV[4], 14)
if not (id and weight and limit and ttl) then
  return redis.error_reply('ERR semaphore_acquire: the weight, limit and TTL must be whole numbers from 1')
end
local queue, waiters = KEYS[5], KEYS[6]
local owner, lease, join = ARGV[5], sem_count(ARGV[6], 14), ARGV[7] == '1'
if queue and not (waiters and owner and lease) then
  return redis.error_reply('ERR semaphore_acquire: fair mode takes six keys, an owner and a waiter lease')
end
local offers, earlier = KEYS[7], ARGV[8] or '-'
-- Another kind's hold of the name (sem_held_by_other): its keys are not
-- this semaphore's, so only the limit, the fences and the line are checked.
local other = sem_held_by_other(permits, held)
local mine = {permits, held, limit_key, fences}
local types = {'zset', 'hash', 'string', 'hash'}
if other then
  mine, types = {limit_key, fences}, {'string', 'hash'}
end
local foreign = sem_foreign(mine, types)
  or (queue and sem_foreign({queue, waiters}, {'list', 'zset'}))
  or (queue and offers and sem_foreign({offers}, {'hash'}))
if foreign then
  return foreign
end
local stored = redis.call('get', limit_key)
if stored then
  if not sem_count(stored, 9) then
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
  -- Held by another kind: a fair waiter keeps its place (and its offer,
  -- which no other kind's hand-off grants), so readers and later waiters
  -- stay behind it.
  if queue and join then
    local now = sem_now()
    line_join(queue, waiters, owner, now, lease)
    if offers then
      sem_offer(offers, owner, id, weight, now, lease, ttl)
    end
  end
  return {0, 0, other}
end
local now = sem_now()
-- Read everything first; an expired permit's entry may be lost (it is
-- dropped with it), a live one's may not.
local expired = redis.call('zrangebyscore', permits, '-inf', now)
local live = redis.call('zrangebyscore', permits, '(' .. now, '+inf', 'withscores')
local used, taken, first, mine = 0, {}, nil, nil
for index = 1, #live, 2 do
  local entry_weight, slot, token = sem_entry(redis.call('hget', held, live[index]))
  if not entry_weight then
    return {-2, held, 'a live permit has no entry <weight>:<slot>:<token>'}
  end
  used = used + entry_weight
  taken[slot] = true
  first = first or tonumber(live[index + 1])
  if live[index] == id then
    mine = {slot, token}
  end
end
if mine then
  sem_drop(permits, held, expired)
  redis.call('zadd', permits, 'xx', now + ttl, id)
  sem_keep(permits, held, now)
  return {1, mine[1], mine[2]}
end
if queue and offers and earlier ~= '-' and owner and line_owner(earlier) == owner
    and tonumber(redis.call('zscore', permits, earlier) or '0') > now then
  local _, slot, token = sem_entry(redis.call('hget', held, earlier))
  -- The grant ran for the waiter lease; this attempt takes it up for the
  -- TTL, so the waiter's lease counts from this attempt.
  sem_drop(permits, held, expired)
  redis.call('zadd', permits, 'xx', now + ttl, earlier)
  sem_keep(permits, held, now)
  return {3, slot, token}
end
-- The slot a grant would take, and its counter checked, before any write.
local slot = 0
while taken[slot] do
  slot = slot + 1
end
local last = redis.call('hget', fences, slot)
if last and (not string.match(last, '^%d+$') or #last > 18) then
  return {-2, fences, 'the counter of slot ' .. slot .. ' is not a number below 10^18'}
end
local head = nil
if queue then
  -- Waiters whose lease ran out leave from the head, so none blocks the rest.
  head = line_head(queue, waiters, offers, now)
end
if used + weight > limit or (head and head ~= owner) then
  sem_drop(permits, held, expired)
  if queue and join then
    line_join(queue, waiters, owner, now, lease)
    if offers then
      sem_offer(offers, owner, id, weight, now, lease, ttl)
    end
  end
  return {0, used, first and (first - now) or -1}
end
sem_drop(permits, held, expired)
redis.call('hincrby', fences, slot, 1)
-- As text, as a retried attempt's token is read from its entry.
local token = redis.call('hget', fences, slot)
redis.call('zadd', permits, now + ttl, id)
redis.call('hset', held, id, ARGV[2] .. ':' .. slot .. ':' .. token)
if not stored then
  redis.call('set', limit_key, ARGV[3])
end
sem_keep(permits, held, now)
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
