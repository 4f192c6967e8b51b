-- Takes a shared (read) or exclusive (write) hold of a read-write lock.
--
-- A write is granted when no other owner has a live hold and the queue of
-- waiting writers is empty or headed by this owner; it gets the next token
-- of the counter. A read is granted when no other owner has a live write
-- and, preferring writers (the default), no writer is waiting; it gets the
-- write epoch, the counter's value (0 before the first write). An owner
-- that already has a live hold re-enters: a read beside its own write (a
-- downgrade) or its own reads, whatever waits, and a write beside its own
-- write, with that write's token. A write by an owner that has only reads
-- is refused: two such upgrades would wait on each other.
--
-- KEYS[1]  the holds (the lease set's sorted set; see rw/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the lease set's slots (a semaphore's; swept permits free theirs)
-- KEYS[4]  the write counter (a string)
-- KEYS[5]  the waiting writers' queue (a list of owners)
-- KEYS[6]  the waiting writers' deadlines (a sorted set)
-- ARGV[1]  the hold id, `<owner>:<nonce>` (16 hex digits)
-- ARGV[2]  `r` (shared) or `w` (exclusive)
-- ARGV[3]  the TTL in ms
-- ARGV[4]  the waiter lease in ms: how long a waiting writer's place lasts
-- ARGV[5]  "1" for a write to join the queue when it must wait, "0" to try
--          once (a one-shot try never queues)
-- ARGV[6]  "w" to prefer writers (a read waits while a writer waits), "r"
--          to prefer readers
-- ARGV[7]  (optional) the counter's TTL in ms after a write
--          (`fencing_counter_ttl`), or 0 (the default): see shared/grant.lua
-- KEYS[7], ARGV[8]  (optional: the server-side hand-off, rw/common.lua) the
--          waiting writers' offers, and the hold id this writer's previous
--          attempt offered, or '-': a write that queues offers this
--          attempt's id, for a release to grant
--
-- Reply:
--   {1, token}       granted (the token as text): a write's token, or a
--                    read's epoch; for an id already live in the same mode
--                    (a retried attempt), its own, its deadline set again
--   {0, wait_ms}     not granted: `wait_ms` is how long until the first
--                    hold or waiting writer in the way ends (-1 when only
--                    the queue's head is); only expired holds and dead
--                    waiters were removed, and a write queued if asked
--   {-2, key, detail} a key holds something that is not this lock's data,
--                    or the id is live in the other mode: nothing was
--                    written
-- Another kind's hold of the same name (a plain lock's string at KEYS[1], a
-- reentrant lock's hash, a semaphore's live permits in the lease set) is in
-- the way as a writer is: {0, its PTTL}, nothing of it written; it sees
-- this lock's key and waits in turn (a plain lock and a write take tokens
-- from the same counter). A write waiting on it keeps its place in the
-- queue.
--   {-4}             a write by an owner that has only reads: nothing was
--                    written
--   {3, token}       (with ARGV[8]) a release already granted the write to
--                    the previous attempt's offer, with this token; that
--                    hold now lives for the TTL (ARGV[3]) and nothing else
--                    was written: the writer holds it from this attempt on
-- Missing KEYS or ARGV is an error reply before anything is read. Every
-- check, and TIME, comes before the first write. The cost does not grow
-- with the live holds (the lease set's tallies say what is in the way);
-- expired holds are swept as lease_set/common.lua says, and dead waiters
-- drop from the queue's head.
if #KEYS < 6 then
  return redis.error_reply('ERR rw_acquire: six keys expected')
end
local holds, held, slots, counter, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id, mode = ARGV[1], ARGV[2]
local ttl, lease = ls_count(ARGV[3], 14), ls_count(ARGV[4], 14)
local join, prefer_readers = ARGV[5] == '1', ARGV[6] == 'r'
local counter_ttl = tonumber(ARGV[7] or '0')
local offers, earlier = KEYS[7], ARGV[8] or '-'
if not (id and (mode == 'r' or mode == 'w') and ttl and lease and (ARGV[6] == 'w' or prefer_readers)
    and counter_ttl and counter_ttl >= 0 and counter_ttl == math.floor(counter_ttl)) then
  return redis.error_reply('ERR rw_acquire: an id, a mode r or w, a TTL and a waiter lease from 1, a preference r or w, and a counter TTL from 0 expected')
end
if not string.match(id, ':%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x$') then
  return redis.error_reply('ERR rw_acquire: the id must end in a 16-digit nonce')
end
local owner = line_owner(id)
local now = ls_now()
local ids = {id}
if earlier ~= '-' then
  ids[2] = earlier
end
local ls, in_way, problem = ls_open_as('rw', holds, held, slots, now, ids, {owner .. ':o'})
if problem then
  return problem
end
if in_way then
  if mode == 'w' and join then
    local foreign = ls_foreign({queue, waiters}, {'list', 'zset'})
    if foreign then
      return foreign
    end
    line_join(queue, waiters, owner, now, lease)
  end
  -- Nothing of the other kind's is written, its expired holds neither.
  return {0, in_way}
end
local checked, kinds = {counter, queue, waiters}, {'string', 'list', 'zset'}
if offers then
  checked[4], kinds[4] = offers, 'hash'
end
local foreign = ls_foreign(checked, kinds)
if foreign then
  return foreign
end
local last = redis.call('get', counter)
problem = counter_problem(last)
if problem then
  return {-2, counter, problem}
end
if offers and earlier ~= '-' and mode == 'w' and line_owner(earlier) == owner and ls_deadline(ls, earlier) then
  local earlier_mode, token = ls_mode(ls.entries[earlier])
  if earlier_mode == 'w' then
    -- The grant ran for the waiter lease; this attempt takes it up for
    -- the TTL, so the writer's lease counts from this attempt.
    ls_add(ls, earlier, now + ttl)
    ls_close(ls)
    rw_counter_outlives(ls, counter)
    return {3, token}
  end
end
-- A retried attempt: its own hold, renewed.
if ls_deadline(ls, id) then
  local hold_mode, token = ls_mode(ls.entries[id])
  if not hold_mode then
    return {-2, held, 'a live hold has no entry r:<epoch> or w:<token>'}
  end
  if hold_mode ~= mode then
    return {-2, held, 'the hold is live in the other mode'}
  end
  ls_add(ls, id, now + ttl)
  ls_close(ls)
  rw_counter_outlives(ls, counter)
  return {1, token}
end
-- What is in the way: the holds of other owners (for a write, any; for
-- a read, writes), by the tallies, swept to the live holds if any.
local function others(own)
  if mode == 'w' then
    return ls.reads + ls.writes - own[1] - own[2]
  end
  return ls.writes - own[2]
end
-- The owner's own holds count only while live: with any, or any other
-- in the way, the expired are swept first.
local own = ls_owner_tally(ls, owner)
if others(own) > 0 or own[1] + own[2] > 0 then
  problem = ls_settle(ls)
  if problem then
    return problem
  end
  own = ls_owner_tally(ls, owner)
end
local own_read, own_write = own[1] > 0, own[2] > 0 and own[3] or nil
if mode == 'w' and own_read and not own_write then
  return {-4}
end
local blocked = others(own) > 0
-- The live head of the writers' queue: dead waiters leave from the head,
-- so none blocks the rest. Only a write looks at the head.
local head = nil
if mode == 'w' and not own_write then
  head = line_head(queue, waiters, offers, now)
end
local waiting_writer = nil
if mode == 'r' and not prefer_readers and not (own_read or own_write) then
  waiting_writer = redis.call('zrangebyscore', waiters, '(' .. now, '+inf', 'withscores', 'limit', 0, 1)[2]
end
local in_queue = head and head ~= owner
if blocked or in_queue or waiting_writer then
  if mode == 'w' and join then
    line_join(queue, waiters, owner, now, lease)
    if offers then
      rw_offer(offers, owner, id, now, lease, ttl)
    end
  end
  -- The first live hold's deadline: one in the way ends then or later.
  local first = blocked and ls_first(ls) or nil
  if waiting_writer then
    first = math.min(first or tonumber(waiting_writer), tonumber(waiting_writer))
  end
  ls_close(ls)
  return {0, first and (first - now) or -1}
end
local token
if mode == 'w' then
  token = own_write or token_text(next_token(counter, last, ttl, counter_ttl))
else
  token = last or '0'
end
ls_add(ls, id, now + ttl, mode .. ':' .. token)
ls_close(ls)
rw_counter_outlives(ls, counter)
if head then
  redis.call('lpop', queue)
  redis.call('zrem', waiters, owner)
end
if offers and mode == 'w' then
  redis.call('hdel', offers, owner)
end
return {1, token}
