-- The line of waiters that fair locks (fair/acquire.lua, shared/handoff.lua), fair
-- semaphores (semaphore/common.lua) and read-write locks' writers (rw/common.lua) keep,
-- loaded in front of their scripts. A line is three keys of one hash tag:
-- `queue`, a list of owners in arrival order; `waiters`, a zset of each
-- owner's place deadline in ms by the server's clock; and `offers`, a hash
-- of the offer each owner made for the server-side hand-off, if it made
-- one: `<grant ms> <place deadline> <id>` for a lock, `w` in front for a
-- write and `p<weight> ` in front for permits, so no primitive's hand-off
-- grants another's. An id is `<owner>:<16 hex digits>`.

-- line_owner(id): the owner part of a hold's or permit's id.
local function line_owner(id)
  return string.sub(id, 1, -18)
end

-- line_waiting(queue, waiters, offers): whether anyone waits in a line
-- whose keys hold what they should. A key of another type grants nobody,
-- and is written to by nothing. Two commands when nobody waits.
local function line_waiting(queue, waiters, offers)
  if redis.call('type', queue)['ok'] ~= 'list' then
    return false
  end
  if not redis.call('lindex', queue, 0) then
    return false
  end
  local kind = redis.call('type', waiters)['ok']
  if kind ~= 'zset' and kind ~= 'none' then
    return false
  end
  kind = redis.call('type', offers)['ok']
  return kind == 'hash' or kind == 'none'
end

-- line_take(queue, waiters, offers, head): takes `head`, the first in line,
-- out of it with its offer (`offers` nil: a line without hand-off). The hash
-- first: a user the server refuses hash commands fails before the script
-- has written anything.
local function line_take(queue, waiters, offers, head)
  if offers then
    redis.call('hdel', offers, head)
  end
  redis.call('lpop', queue)
  redis.call('zrem', waiters, head)
end

-- line_head(queue, waiters, offers, now): drops the waiters whose place ran
-- out from the head of the line, so none blocks the rest, and returns the
-- first live one and its place's deadline; nil when nobody waits.
local function line_head(queue, waiters, offers, now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return nil
    end
    local deadline = tonumber(redis.call('zscore', waiters, head))
    if deadline and deadline > now then
      return head, deadline
    end
    line_take(queue, waiters, offers, head)
  end
end

-- line_join(queue, waiters, owner, now, lease): keeps `owner` in line for
-- `lease` ms from `now`, and returns the place's new deadline: at the back
-- when it is new or its place had run out (an expired place is not taken
-- back: whoever joined meanwhile stays ahead of a waiter that stopped
-- asking), in its place otherwise. The line's keys vanish on their own once
-- every waiter is gone.
local function line_join(queue, waiters, owner, now, lease)
  local place = tonumber(redis.call('zscore', waiters, owner))
  if place and place <= now then
    redis.call('lrem', queue, 0, owner)
    place = nil
  end
  if not place then
    redis.call('rpush', queue, owner)
  end
  local deadline = now + lease
  redis.call('zadd', waiters, deadline, owner)
  redis.call('pexpire', queue, lease * 2)
  redis.call('pexpire', waiters, lease * 2)
  return deadline
end

-- line_parse(offer, tag): an offer's parts: how long a grant runs, the
-- place deadline it was made with, the id, and for permits (`tag` 'p') the
-- weight; nil when it is not an offer of `tag` ('' a lock's, 'w' a
-- write's, 'p' permits').
local function line_parse(offer, tag)
  if tag == 'p' then
    local weight, runs, made_with, id = string.match(offer, '^p([1-9]%d*) ([1-9]%d*) (%d+) (.+)$')
    return tonumber(runs), tonumber(made_with), id, tonumber(weight)
  end
  local runs, made_with, id = string.match(offer, '^' .. tag .. '([1-9]%d*) (%d+) (.+)$')
  return tonumber(runs), tonumber(made_with), id
end

-- line_offer(offers, head, deadline, tag): the offer of `tag` the live
-- `head` made with its place's current deadline: how long a grant runs,
-- the id and (permits) the weight. Nil when it made none with that
-- deadline (an older client, or an attempt of a config that grants on the
-- waiter's side left an old one behind) or it names another owner: that
-- waiter takes its own turn.
local function line_offer(offers, head, deadline, tag)
  local offer = redis.call('hget', offers, head)
  if not offer then
    return nil
  end
  local runs, made_with, id, weight = line_parse(offer, tag)
  if not runs or made_with ~= deadline or line_owner(id) ~= head then
    return nil
  end
  return runs, id, weight
end

-- line_keep_offer(offers, owner, text, lease): keeps `text` as `owner`'s
-- offer; the offers vanish on their own with the line.
local function line_keep_offer(offers, owner, text, lease)
  redis.call('hset', offers, owner, text)
  redis.call('pexpire', offers, lease * 2)
end

-- line_void_offer(offers, id, tag): drops the offer of `tag` that names
-- `id`, a hold or permit being given back (an attempt whose reply was lost
-- is released before the waiter's next one): no hand-off may grant it,
-- since nobody would take it up. The waiter keeps its place; its next
-- attempt offers again. Nothing is written when `offers` is not a hash.
local function line_void_offer(offers, id, tag)
  if redis.call('type', offers)['ok'] ~= 'hash' then
    return
  end
  local owner = line_owner(id)
  local offer = redis.call('hget', offers, owner)
  if offer and select(3, line_parse(offer, tag)) == id then
    redis.call('hdel', offers, owner)
  end
end
