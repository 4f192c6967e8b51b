-- Prepended, after shared/queue.lua and lease_set/common.lua, to the
-- barrier scripts and name/inspect.lua. A barrier's parties are holds of
-- the name's lease set (entry `b<ttl ms>`, tally `:parties`), each with its own
-- deadline by the server's clock, so a party that stops renewing is no
-- longer counted once its lease ends. Beside them, the barrier's record,
-- a string of its round: `<parties>:<round>` while it fills,
-- `<parties>:<round>:open` from when the last party entered until every
-- party has left, expiring with the last hold. `<round>` is the server's
-- time in µs when the round's first party entered: a party waiting for
-- the others to leave knows its round is over when the record names
-- another. A record whose lease set has no live party is no round's.
-- And the parties that left, kept out for twice their TTL (barrier_bury),
-- so an attempt of one that lands late enters nothing.

-- barrier_record(record): the party count, whether the round is open and
-- the round, of the record, or nil when there is none; or nil, nil, nil
-- and {-2, key, detail} when it holds another type or does not parse.
-- Reads only.
local function barrier_record(record)
  local text, problem = ls_read(record, 'get')
  if problem then
    return nil, nil, nil, problem
  end
  if not text then
    return nil
  end
  local parties, round, open = string.match(text, '^([1-9]%d*):([1-9]%d*)(.*)$')
  if not parties or #parties > 9 or #round > 18 or (open ~= '' and open ~= ':open') then
    return nil, nil, nil, {-2, record, 'the record is not <parties>:<round>[:open]'}
  end
  return tonumber(parties), open == ':open', round
end

-- barrier_round(): a new round's id, the server's time in µs, as text.
local function barrier_round()
  local time = redis.call('time')
  return time[1] .. string.format('%06d', tonumber(time[2]))
end

-- barrier_keep(ls, record, parties, open, round): the record written once
-- ls_close has written the lease set: `<parties>:<round>[:open]`, expiring
-- with the last hold, or deleted when no hold is left.
local function barrier_keep(ls, record, parties, open, round)
  if ls.n <= 0 or ls.last <= ls.now then
    redis.call('del', record)
    return
  end
  redis.call('set', record, parties .. ':' .. round .. (open and ':open' or ''), 'PX',
    ls.last - ls.now)
end

-- barrier_bury(left, id, until_ms, now): keeps the party `id` out until
-- `until_ms`. `left` is a sorted set of id -> until, pruned here and
-- expiring with its last entry.
local function barrier_bury(left, id, until_ms, now)
  redis.call('zremrangebyscore', left, '-inf', now)
  redis.call('zadd', left, until_ms, id)
  local last = tonumber(redis.call('zrange', left, -1, -1, 'withscores')[2])
  redis.call('pexpire', left, math.max(last - now, 1))
end

-- barrier_buried(left, id, now): whether the party `id` left or withdrew
-- and is kept out. Reads only.
local function barrier_buried(left, id, now)
  local until_ms = tonumber(redis.call('zscore', left, id) or nil)
  return until_ms ~= nil and until_ms > now
end

-- barrier_state(set, held, record, id, now): the barrier's state, read
-- only: {parties, open, entered, own, wait_ms, round} (`parties` 0, `open`
-- 0 and `round` '' without a live party; `entered` the live parties; `own`
-- 1 when the hold `id` is one of them; `wait_ms` until the last of them
-- ends, -1 without one), or {-3, kind} when another primitive holds the
-- name, or {-2, key, detail}.
local function barrier_state(set, held, record, id, now)
  local parties, open, round, problem = barrier_record(record)
  if problem then
    return problem
  end
  local ls
  ls, problem = ls_open(set, held, nil, now, {id})
  if not ls then
    if ls_other(problem, set) then
      return {-3, 'lock'}
    end
    return problem
  end
  problem = ls_settle(ls)
  if problem then
    return problem
  end
  if ls_others(ls, 'b') > 0 then
    return {-3, 'zset'}
  end
  if ls.parties <= 0 or not parties then
    return {0, 0, 0, 0, -1, ''}
  end
  local last = ls_last(ls)
  return {parties, open and 1 or 0, ls.parties, ls_deadline(ls, id) and 1 or 0,
    last and (last - now) or -1, round}
end
