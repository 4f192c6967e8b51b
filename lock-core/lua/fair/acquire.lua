-- Takes a single-node lock in arrival order (fair mode), or queues the caller.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence`
-- KEYS[3]  the waiter queue (a list of owner tokens), `<prefix>{<name>}:queue`
-- KEYS[4]  the waiters' deadlines (a zset, score = ms since the epoch by the
--          server's clock), `<prefix>{<name>}:waiters`
-- KEYS[5]  the holder information, `<prefix>{<name>}:holder`
-- ARGV[1]  the owner token: the waiter's place in the queue, kept across its
--          attempts
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the waiter lease in milliseconds: a queued waiter that does not try
--          again within it is dropped from the queue (it gave up or died)
-- ARGV[4]  "1" to join the queue when the lock is not ours to take, "0" to
--          just try once
-- ARGV[5]  the hold's value, `<owner>:<nonce>` (unique to this attempt), stored
--          in the lock key with `#<token>` behind it (see lock/acquire.lua)
-- ARGV[6..10]  what the grant writes beside the lock (shared/grant.lua): the
--          counter's TTL (0: none) and the holder information
-- KEYS[6], ARGV[11]  (optional: server-side hand-off, shared/handoff.lua) the
--          waiters' offers, `<prefix>{<name>}:offers`, and the hold this
--          waiter's previous attempt offered, `<owner>:<nonce>`, or '-': a
--          waiter that joins the queue offers this attempt's hold, for a
--          release to grant it
--
-- Reply:
--   {1, token}  acquired: the lock was free and the queue empty or headed by
--               this owner (who leaves the queue); token as in lock/acquire.lua
--   {0, pttl}   not this owner's turn: the holder's remaining TTL in ms, -2 if
--               the lock is free but an earlier waiter is first, -1 for no expiry
--   {-1, detail}  the fencing counter or the holder key holds foreign data;
--                 nothing was written
--   {3, token}  (with ARGV[11]) a release already granted the lock to the
--               previous attempt's offer, with this token (decimal text);
--               the key now lives for the TTL (ARGV[2]) and nothing else
--               was written: the waiter holds it from this attempt on
-- A name another kind holds (a read-write lock's or semaphore's sorted set,
-- a reentrant lock's hash at KEYS[1]) is held as a lock is: {0, its PTTL},
-- and the waiter keeps its place in line.
-- All keys share the hash tag, so they live in one cluster slot.
-- The counter is checked before any write (see lock/acquire.lua). The queue keys
-- always have a TTL (twice the waiter lease, renewed by each waiter), so a
-- line whose waiters all died vanishes on its own.
-- counter_problem, next_token, holder_problem and write_holder come from
-- shared/fencing_counter.lua and shared/grant.lua, line_head and line_keep_offer from
-- shared/queue.lua, loaded in front of this file.
local counter = redis.call('get', KEYS[2])
local problem = counter_problem(counter) or holder_problem(KEYS[5])
if problem then
  return {-1, problem}
end
local offers = KEYS[6]
local earlier = ARGV[11]
if offers then
  local kind = redis.call('type', offers)['ok']
  if kind ~= 'none' and kind ~= 'hash' then
    return {-1, 'the waiters\' offers key holds a ' .. kind .. ', not a hash'}
  end
end
if offers and earlier ~= '-' and redis.call('type', KEYS[1])['ok'] == 'string' then
  local stored = redis.call('get', KEYS[1])
  if stored and string.sub(stored, 1, #earlier + 1) == earlier .. '#' then
    local token = string.sub(stored, #earlier + 2)
    if string.match(token, '^[1-9]%d*$') then
      -- The grant ran for the waiter lease; this attempt takes it up for
      -- the TTL, so the waiter's lease counts from this attempt.
      redis.call('pexpire', KEYS[1], ARGV[2])
      return {3, token}
    end
  end
end
read_grant_time(6)
local counter_ttl = tonumber(ARGV[6]) or 0
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

-- Waiters whose lease ran out leave from the head, so none blocks the rest
-- (shared/queue.lua: the hash first, so a user the server refuses hash commands
-- fails before this script wrote anything).
local head = line_head(KEYS[3], KEYS[4], offers, now)
if redis.call('exists', KEYS[1]) == 0 and (not head or head == ARGV[1]) then
  if offers then
    redis.call('hdel', offers, ARGV[1])
  end
  local token = next_token(KEYS[2], counter, tonumber(ARGV[2]), counter_ttl)
  local value = ARGV[5] .. '#' .. token_text(token)
  redis.call('set', KEYS[1], value, 'PX', ARGV[2])
  write_holder(KEYS[5], ARGV[2], 6, value)
  if head then
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], ARGV[1])
  end
  return {1, token}
end

if ARGV[4] == '1' then
  local lease = tonumber(ARGV[3])
  local deadline = string.format('%d', now + lease)
  if offers then
    -- The offer: how long a grant to it runs (the waiter lease, or the TTL
    -- if shorter), the place's deadline it was made with (a hand-off grants
    -- it only while the place still has that deadline, so an offer a later
    -- attempt without one left behind is never granted), and the hold.
    -- The hash first, before anything is written (see above).
    local runs = math.min(lease, tonumber(ARGV[2]))
    line_keep_offer(offers, ARGV[1], string.format('%d', runs) .. ' ' .. deadline .. ' ' .. ARGV[5], lease)
  end
  line_join(KEYS[3], KEYS[4], ARGV[1], now, lease)
end
return {0, redis.call('pttl', KEYS[1])}
