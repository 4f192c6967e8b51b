-- Prepended, after shared/queue.lua, to the scripts of the primitives with
-- many holders: a semaphore's permits, a read-write lock's reads and
-- writes, and a barrier's parties are holds of one lease set a name, in
-- keys that share its hash tag:
--   set    a sorted set: hold id (`<owner>:<nonce>`) -> its deadline, in
--          ms of the server's clock (never a client's)
--   held   a hash: hold id -> its entry (`<weight>:<slot>:<token>` for a
--          permit, `r:<epoch>` for a read, `w:<token>` for a write,
--          `b<ttl ms>` for a barrier's party), and the tallies of the holds in `set`,
--          which a grant reads instead of the holds themselves:
--            `:n`        how many holds
--            `:weight`   the permits' weight
--            `:reads`, `:writes`  the read and the write holds
--            `:parties`  a barrier's parties
--            `:last`     the last deadline, at which the keys expire
--            `:next`     the semaphore slots handed out: every slot in
--                        use is below it
--            `:free`     how many slots below `:next` are free (in `slots`)
--            `<owner>:o` an owner's reads, writes and its writes' token,
--                        `<reads>:<writes>:<token>`
--          No tally's name ends in `:` and 16 hex digits, as every id does.
--   slots  (a semaphore's) a sorted set of the free slots below `:next`,
--          each scored by its number, so the lowest free slot is the lower
--          of its first and `:next`
-- The tallies count every hold in `set`, live or expired and not yet
-- swept, and each script leaves them exact. A script reads at most
-- LS_SWEEP expired holds, earliest first, and drops them before its first
-- write of its own; before it refuses a grant or finds another kind in the
-- way it reads the rest and checks the tallies against `set` (ls_settle),
-- so no refusal counts an expired hold. A hold is swept once, by the first
-- script after its deadline, so a call's sweep is paid for by the grants
-- before it and no grant reads a live hold. Sweeping any kind's holds is
-- exact, as the tallies of every kind are in the one hash (the scripts
-- never let two kinds' live holds share the set). When `set` has no hold
-- left, the tallies and the slots go with it. The keys expire with the
-- last hold (ls_close), so another kind finds the name free when this
-- kind's last hold ends; tallies whose last deadline has passed are read
-- as nothing held. The keys must not be evicted (`maxmemory-policy
-- noeviction`).

local LS_SWEEP = 64

-- ls_count(text, digits): `text` as a whole number from 1 with at most
-- `digits` digits, or nil.
local function ls_count(text, digits)
  if type(text) ~= 'string' or #text > digits or not string.match(text, '^[1-9]%d*$') then
    return nil
  end
  return tonumber(text)
end

-- ls_now(): the server's time in ms.
local function ls_now()
  local time = redis.call('time')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- ls_foreign(keys, types): the first of `keys` whose type is neither
-- `none` nor the one `types` names at the same index, as the reply
-- {-2, key, type}; nil when all are as expected. Reads only.
local function ls_foreign(keys, types)
  for index, key in ipairs(keys) do
    local found = redis.call('type', key)['ok']
    if found ~= 'none' and found ~= types[index] then
      return {-2, key, found}
    end
  end
  return nil
end

-- ls_read(key, command, ...): the reply of a read of `key`, or nil and
-- {-2, key, type} when the key holds another type (WRONGTYPE). Any other
-- error is the server's own, raised again. So a key's type costs nothing
-- when it is right.
local function ls_read(key, command, ...)
  local reply = redis.pcall(command, key, ...)
  if type(reply) == 'table' and reply['err'] then
    if string.find(reply['err'], 'WRONGTYPE', 1, true) then
      return nil, {-2, key, redis.call('type', key)['ok']}
    end
    return redis.call(command, key, ...)
  end
  return reply
end

-- ls_other(problem, set): when `problem` (ls_open's) says `set`, the
-- name's key, is a lock's string or a reentrant lock's hash, another
-- kind's hold, true (another key of the wrong type is foreign data).
local function ls_other(problem, set)
  return problem and problem[1] == -2 and problem[2] == set
    and (problem[3] == 'string' or problem[3] == 'hash')
end

-- ls_permit(text): the weight, slot and token of a permit's entry, or nil.
local function ls_permit(text)
  local weight, slot, token = string.match(text or '', '^(%d+):(%d+):(%d+)$')
  if not weight then
    return nil
  end
  return tonumber(weight), tonumber(slot), token
end

-- ls_mode(text): the mode (`r` or `w`) and token text of a read's or a
-- write's entry, or nil.
local function ls_mode(text)
  local mode, token = string.match(text or '', '^([rw]):(%d+)$')
  if not mode or #token > 19 then
    return nil
  end
  return mode, token
end

-- ls_party(text): whether `text` is a barrier party's entry, `b<ttl ms>`.
local function ls_party(text)
  return type(text) == 'string' and string.match(text, '^b%d*$') ~= nil
end

-- ls_owner_tally(ls, owner): an owner's reads, writes and writes' token,
-- {reads, writes, token}, read once a script (none while the tallies are
-- being made anew: an owner's field may be left from before).
local function ls_owner_tally(ls, owner)
  local tally = ls.owners[owner]
  if not tally then
    local text = false
    if not ls.fresh then
      text = ls.extra[owner .. ':o']
      if text == nil then
        text = redis.call('hget', ls.held, owner .. ':o')
      end
    end
    local reads, writes, token = string.match(text or '', '^(%d+):(%d+):(%d*)$')
    tally = {tonumber(reads) or 0, tonumber(writes) or 0, token or ''}
    ls.owners[owner] = tally
  end
  return tally
end

-- ls_count_hold(ls, id, entry, sign): the tallies with the hold `id` of
-- `entry` added (sign 1) or taken away (-1); a permit taken away frees its
-- slot (written by ls_close). An entry that parses as nothing counts as a
-- hold only.
local function ls_count_hold(ls, id, entry, sign)
  ls.dirty = true
  ls.n = ls.n + sign
  local weight, slot = ls_permit(entry)
  if weight then
    ls.weight = ls.weight + sign * weight
    if sign < 0 then
      ls.freed[slot] = true
    end
    return
  end
  if ls_party(entry) then
    ls.parties = ls.parties + sign
    return
  end
  local mode, token = ls_mode(entry)
  if not mode then
    return
  end
  local tally = ls_owner_tally(ls, line_owner(id))
  if mode == 'r' then
    ls.reads = ls.reads + sign
    tally[1] = tally[1] + sign
  else
    ls.writes = ls.writes + sign
    tally[2] = tally[2] + sign
    if sign > 0 then
      tally[3] = token
    end
  end
  ls.owners_changed = true
end

-- ls_clear(ls): tallies of nothing: `held` and `slots` are deleted by
-- ls_drop_swept, and anything read of them is forgotten.
local function ls_clear(ls)
  ls.n, ls.weight, ls.reads, ls.writes, ls.parties, ls.last = 0, 0, 0, 0, 0, 0
  ls.next, ls.free = 0, 0
  ls.owners, ls.extra, ls.expired, ls.gone, ls.freed = {}, {}, {}, {}, {}
  for id in pairs(ls.entries) do
    ls.entries[id] = false
  end
  ls.reset, ls.fresh, ls.dirty, ls.swept, ls.verified = true, true, true, true, true
end

-- ls_read_expired(ls, limit): reads up to `limit` (nil: every) expired
-- hold not yet read, and counts them out of the tallies; ls_drop_swept
-- drops them. Reads only. Returns nil, or {-2, key, type} when `set` holds
-- another type (ls_other: another kind's hold).
local function ls_read_expired(ls, limit)
  -- One more than `limit`: whether any is left after them.
  local ids, problem = ls_read(ls.set, 'zrangebyscore', '-inf', ls.now, 'limit', #ls.expired,
    limit and limit + 1 or -1)
  if not ids then
    return problem
  end
  ls.swept = limit == nil or #ids <= limit
  if not ls.swept then
    ids[#ids] = nil
  end
  if #ids == 0 then
    return nil
  end
  local entries = redis.call('hmget', ls.held, unpack(ids))
  for index, id in ipairs(ids) do
    ls.expired[#ls.expired + 1] = id
    ls.gone[id] = true
    ls_count_hold(ls, id, entries[index] or nil, -1)
  end
  return nil
end

-- ls_rebuild(ls): tallies that do not match `set` (its holds' count
-- differs: the set was deleted without its hash, or someone else wrote to
-- either) are made again from `set` and the entries: every expired hold
-- is dropped, a live one counts by its entry, the free slots are those
-- below the highest in use that no live permit has, and `held` and `slots`
-- are written anew (ls_drop_swept, ls_close). Or {-2, key, detail} when a
-- live hold has no entry of a lease set: then nothing of `ls` changed, and
-- it is `broken` (ls_close writes nothing). Reads only; the cost is in the
-- holds, on this path alone.
local function ls_rebuild(ls)
  local holds = redis.call('zrange', ls.set, 0, -1, 'withscores')
  local live, expired, last = {}, {}, 0
  for index = 1, #holds, 2 do
    local id, deadline = holds[index], tonumber(holds[index + 1])
    if deadline <= ls.now then
      expired[#expired + 1] = id
    else
      -- An entry this script added is not written yet.
      local entry = ls.entries[id] or redis.call('hget', ls.held, id)
      if not (ls_permit(entry) or ls_mode(entry) or ls_party(entry)) then
        ls.broken = true
        return {-2, ls.held, 'a live hold has no entry of a permit, a read, a write or a party'}
      end
      live[#live + 1] = {id, entry}
      last = math.max(last, deadline)
    end
  end
  local added = ls.added or {}
  ls_clear(ls)
  ls.added, ls.expired, ls.last, ls.extended = {}, expired, last, true
  for _, id in ipairs(expired) do
    ls.gone[id] = true
  end
  local taken = {}
  for _, hold in ipairs(live) do
    local id, entry = hold[1], hold[2]
    ls.entries[id] = entry
    ls.added[#ls.added + 1] = id
    ls.added[#ls.added + 1] = entry
    ls_count_hold(ls, id, entry, 1)
    local _, slot = ls_permit(entry)
    if slot then
      taken[slot] = true
      ls.next = math.max(ls.next, slot + 1)
    end
  end
  for slot = 0, ls.next - 1 do
    if not taken[slot] then
      ls.freed[slot] = true
    end
  end
  -- Entries this script added before, written again (the same values).
  for index = 1, #added do
    ls.added[#ls.added + 1] = added[index]
  end
  return nil
end

-- ls_verify(ls): checks the tallies against `set`'s size, which a script
-- reads when it cannot trust them (nothing counted, or every hold's
-- deadline passed) and before a refusal: a set deleted or written to
-- outside the scripts is made anew (ls_clear, ls_rebuild). Returns nil, or
-- {-2, key, detail}. Reads only.
local function ls_verify(ls)
  if ls.verified then
    return nil
  end
  ls.verified = true
  local card, problem = ls_read(ls.set, 'zcard')
  if not card then
    return problem
  end
  if card ~= ls.n + #ls.expired then
    if card == 0 then
      ls_clear(ls)
      return nil
    end
    return ls_rebuild(ls)
  end
  return nil
end

-- ls_settle(ls): reads every expired hold left (ls_read_expired) and
-- checks the tallies (ls_verify), so they count the live holds only;
-- called before a refusal or a hand-off. Returns nil, or {-2, key,
-- detail}.
local function ls_settle(ls)
  if not ls.swept then
    local problem = ls_read_expired(ls, nil)
    if problem then
      return problem
    end
  end
  return ls_verify(ls)
end

-- ls_open(set, held, slots, now, ids, extra): the lease set of the keys,
-- as a table (the tallies `n`, `weight`, `reads`, `writes`, `parties`,
-- `last`, the
-- weight before the sweep `opened_weight`, the `entries` of the hold ids
-- `ids` (false for none), the values of the `extra` fields of `held` (an
-- owner's tally), all read in one call, and what the script has changed,
-- for ls_close to write), with up to LS_SWEEP expired holds counted out.
-- Or nil and {-2, key, detail} when `set` or `held` holds another type
-- (ls_other: another kind's hold) or a live hold has no entry. Reads only:
-- nothing is written before ls_drop_swept.
local function ls_open(set, held, slots, now, ids, extra)
  ids, extra = ids or {}, extra or {}
  local fields = {':n', ':weight', ':reads', ':writes', ':last', ':next', ':free', ':parties'}
  local first = #fields
  for _, field in ipairs(ids) do
    fields[#fields + 1] = field
  end
  for _, field in ipairs(extra) do
    fields[#fields + 1] = field
  end
  local tallies, problem = ls_read(held, 'hmget', unpack(fields))
  if not tallies then
    return nil, problem
  end
  local ls = {
    set = set, held = held, slots = slots, now = now,
    n = tonumber(tallies[1]) or 0, weight = tonumber(tallies[2]) or 0,
    reads = tonumber(tallies[3]) or 0, writes = tonumber(tallies[4]) or 0,
    last = tonumber(tallies[5]) or 0,
    next = tonumber(tallies[6]) or 0, free = tonumber(tallies[7]) or 0,
    parties = tonumber(tallies[8]) or 0,
    entries = {}, extra = {}, expired = {}, gone = {}, owners = {}, freed = {},
    swept = false, verified = false,
  }
  for index = first + 1, #fields do
    local value = tallies[index] or false
    if index - first <= #ids then
      ls.entries[fields[index]] = value
    else
      ls.extra[fields[index]] = value
    end
  end
  if ls.n <= 0 or ls.last <= now then
    -- Nothing counted, or every hold has ended: `set` itself says.
    problem = ls_verify(ls)
    if problem then
      return nil, problem
    end
    if ls.n <= 0 and not ls.reset then
      ls_clear(ls)
    end
  end
  -- `slots` is written only after the script's checks: its type, and its
  -- size against `:free`, are checked here.
  if slots and (ls.free > 0 or ls.weight > 0) and not ls.fresh then
    local free
    free, problem = ls_read(slots, 'zcard')
    if not free then
      return nil, problem
    end
    if free ~= ls.free then
      return nil, {-2, slots, 'the tallies count ' .. ls.free .. ' free slots, the set has ' .. free}
    end
  end
  -- The permits' weight before the sweep: what a release frees with its own.
  ls.opened_weight = ls.weight
  if not ls.swept then
    problem = ls_read_expired(ls, LS_SWEEP)
    if problem then
      return nil, problem
    end
  end
  return ls
end

-- ls_others(ls, kind): the holds of the other kinds that keep a lease set,
-- by the tallies: for a semaphore (`kind` 'p'), a read-write lock's reads
-- and writes and a barrier's parties; for a barrier ('b'), the permits'
-- weight and the reads and writes; for a read-write lock (any other
-- `kind`), the permits' weight and the parties.
local function ls_others(ls, kind)
  if kind == 'p' then
    return ls.reads + ls.writes + ls.parties
  end
  if kind == 'b' then
    return ls.weight + ls.reads + ls.writes
  end
  return ls.weight + ls.parties
end

-- ls_last(ls): the deadline of the last live hold, or nil.
local function ls_last(ls)
  local last = redis.call('zrange', ls.set, -1, -1, 'withscores')
  local deadline = tonumber(last[2])
  if not deadline or deadline <= ls.now then
    return nil
  end
  return deadline
end

-- ls_in_way(ls, kind): how long (ms) the other kind's holds in the lease
-- set last (ls_others), swept to the live ones first; nil when none is
-- live; nil and {-2, key, detail} when the sweep finds foreign data.
local function ls_in_way(ls, kind)
  if ls_others(ls, kind) == 0 then
    return nil
  end
  local problem = ls_settle(ls)
  if problem then
    return nil, problem
  end
  if ls_others(ls, kind) == 0 then
    return nil
  end
  return (ls_last(ls) or ls.now) - ls.now
end

-- ls_open_as(kind, set, held, slots, now, ids, extra): the lease set
-- (ls_open) for an acquire of `kind`, and how long another kind's hold of
-- the name lasts (ms; -1 for no expiry) when there is one: a lock's string
-- or a reentrant lock's hash at `set` (its PTTL; then no lease set), or the
-- other kind's live holds in the lease set (ls_in_way). Or nil, nil and
-- {-2, key, detail} for foreign data.
local function ls_open_as(kind, set, held, slots, now, ids, extra)
  local ls, problem = ls_open(set, held, slots, now, ids, extra)
  if not ls then
    if ls_other(problem, set) then
      return nil, redis.call('pttl', set)
    end
    return nil, nil, problem
  end
  local other
  other, problem = ls_in_way(ls, kind)
  if problem then
    return nil, nil, problem
  end
  return ls, other
end

-- ls_open_own(kind, set, held, slots, now, ids, extra): the lease set
-- (ls_open) for a renewal, release, take-over or give-up of `kind`: nil
-- and 0 (not held; nothing written) when the name is another kind's: a
-- lock's string or a reentrant lock's hash at `set`, or the other kind's
-- holds in the lease set (live or not: a stale holder writes nothing of
-- another kind's); or nil and {-2, key, detail} for foreign data.
local function ls_open_own(kind, set, held, slots, now, ids, extra)
  local ls, problem = ls_open(set, held, slots, now, ids, extra)
  if not ls then
    if ls_other(problem, set) then
      return nil, 0
    end
    return nil, problem
  end
  if ls_others(ls, kind) > 0 then
    return nil, 0
  end
  return ls
end

-- ls_line(ls, queue): whether waiters keep a line at `queue` (a list), and
-- then the live holds made exact for a hand-off (ls_settle: every expired
-- hold swept and the tallies checked) before anything is written: true,
-- and nil or the {-2, key, detail} that finds.
local function ls_line(ls, queue)
  if not queue or redis.call('type', queue)['ok'] ~= 'list' then
    return false
  end
  return true, ls_settle(ls)
end

-- ls_deadline(ls, id): the deadline of the live hold `id`, or nil (absent,
-- expired, or counted out by this script).
local function ls_deadline(ls, id)
  -- No entry read for it (ls_open's `ids`): not in the set.
  if ls.gone[id] or ls.entries[id] == false then
    return nil
  end
  local deadline = tonumber(redis.call('zscore', ls.set, id) or nil)
  if not deadline or deadline <= ls.now then
    return nil
  end
  return deadline
end

-- ls_first(ls): the deadline of the first live hold, or nil.
local function ls_first(ls)
  local first = redis.call('zrangebyscore', ls.set, '(' .. ls.now, '+inf', 'withscores', 'limit', 0, 1)
  return tonumber(first[2])
end

-- ls_drop_swept(ls): writes the sweep: the tallies' keys deleted when they
-- are made anew, and the expired holds read so far out of `set` and
-- `held`. The first write of a script that has passed its checks;
-- ls_add, ls_remove and ls_close call it.
local function ls_drop_swept(ls)
  if ls.reset then
    redis.call('del', ls.held, ls.slots or ls.held)
    ls.reset = false
  end
  if #ls.expired > 0 then
    redis.call('zrem', ls.set, unpack(ls.expired))
    redis.call('hdel', ls.held, unpack(ls.expired))
    ls.expired = {}
  end
end

-- ls_slot(ls): the lowest slot no permit in `set` has: one freed by this
-- script, the first of `slots`, or `:next`. Reads only.
local function ls_slot(ls)
  local lowest = ls.next
  for slot in pairs(ls.freed) do
    if slot < lowest then
      lowest = slot
    end
  end
  if ls.free > 0 and not ls.fresh then
    local first = tonumber(redis.call('zrange', ls.slots, 0, 0)[1])
    if first and first < lowest then
      lowest = first
    end
  end
  return lowest
end

-- ls_claim_slot(ls, slot): `slot`, which ls_slot gave or a hold just
-- removed had, is in use again.
local function ls_claim_slot(ls, slot)
  if ls.freed[slot] then
    ls.freed[slot] = nil
  elseif slot >= ls.next then
    ls.next = slot + 1
  else
    redis.call('zrem', ls.slots, slot)
    ls.free = ls.free - 1
  end
end

-- ls_add(ls, id, deadline, entry): the hold `id` added to the set with its
-- entry, or its deadline set again when it is there (`entry` nil). An
-- expired hold of the same id not swept yet is counted out first.
local function ls_add(ls, id, deadline, entry)
  ls_drop_swept(ls)
  ls.dirty = true
  if not entry and deadline < ls.last then
    -- A renewal for a shorter TTL may lower the last deadline.
    ls.lowered = true
  end
  if entry then
    local old = ls.entries[id]
    if old == nil then
      old = redis.call('hget', ls.held, id)
    end
    if old and not ls.gone[id] then
      ls_count_hold(ls, id, old, -1)
    end
    redis.call('zadd', ls.set, deadline, id)
    -- Written with the tallies, by ls_close.
    ls.added = ls.added or {}
    ls.added[#ls.added + 1] = id
    ls.added[#ls.added + 1] = entry
    ls.entries[id], ls.gone[id] = entry, nil
    ls_count_hold(ls, id, entry, 1)
    local _, slot = ls_permit(entry)
    if slot then
      ls_claim_slot(ls, slot)
    end
  else
    redis.call('zadd', ls.set, 'xx', deadline, id)
  end
  if deadline > ls.last then
    ls.last, ls.extended = deadline, true
  end
end

-- ls_remove(ls, id, entry, deadline): the hold `id`, of `entry`, out of
-- the set; `deadline`, its own, says whether it may have been the last.
local function ls_remove(ls, id, entry, deadline)
  ls_drop_swept(ls)
  if not deadline or deadline >= ls.last then
    ls.lowered = true
  end
  redis.call('zrem', ls.set, id)
  redis.call('hdel', ls.held, id)
  ls.gone[id] = true
  ls_count_hold(ls, id, entry, -1)
end

-- ls_close(ls): writes what is left of the script's changes: the sweep,
-- the freed slots, the new entries and the tallies (one HSET), and the
-- keys' expiry at the last deadline (`:last`), when a deadline was set
-- past it, or a hold that may have had it was removed or renewed for less
-- (then the last one is read). A set left without holds takes `held` and
-- `slots` with it. A `broken` lease set (foreign data found) writes
-- nothing more.
local function ls_close(ls)
  if ls.broken or not ls.dirty then
    return
  end
  ls_drop_swept(ls)
  if ls.n <= 0 then
    redis.call('del', ls.set, ls.held, ls.slots or ls.held)
    return
  end
  local expire = ls.extended
  if ls.lowered then
    -- Set again even when the last deadline is the same: a remove that
    -- emptied `set` and an add after it made it anew, with no expiry.
    ls.last = tonumber(redis.call('zrange', ls.set, -1, -1, 'withscores')[2])
    expire = true
  end
  if expire and ls.last <= ls.now then
    -- Every hold left has expired (more than a sweep reads): none is live.
    redis.call('del', ls.set, ls.held, ls.slots or ls.held)
    return
  end
  -- Freed slots at the top lower `:next`; the others join `slots`.
  while ls.next > 0 and ls.freed[ls.next - 1] do
    ls.freed[ls.next - 1] = nil
    ls.next = ls.next - 1
  end
  local frees = {}
  for slot in pairs(ls.freed) do
    frees[#frees + 1] = slot
    frees[#frees + 1] = slot
  end
  -- `slots` made now has no expiry yet.
  local new_slots = #frees > 0 and ls.free == 0
  if #frees > 0 then
    redis.call('zadd', ls.slots, unpack(frees))
    ls.free = ls.free + #frees / 2
  end
  local fields = ls.added or {}
  for _, field in ipairs({':n', ls.n, ':weight', ls.weight, ':reads', ls.reads, ':writes', ls.writes,
      ':parties', ls.parties, ':last', ls.last, ':next', ls.next, ':free', ls.free}) do
    fields[#fields + 1] = field
  end
  local emptied = {}
  if ls.owners_changed then
    for owner, tally in pairs(ls.owners) do
      if tally[1] + tally[2] > 0 then
        fields[#fields + 1] = owner .. ':o'
        fields[#fields + 1] = tally[1] .. ':' .. tally[2] .. ':' .. (tally[2] > 0 and tally[3] or '')
      elseif not ls.fresh then
        emptied[#emptied + 1] = owner .. ':o'
      end
    end
  end
  redis.call('hset', ls.held, unpack(fields))
  if #emptied > 0 then
    redis.call('hdel', ls.held, unpack(emptied))
  end
  local left = ls.last - ls.now
  if expire then
    redis.call('pexpire', ls.set, left)
    redis.call('pexpire', ls.held, left)
  end
  if ls.slots and ls.free > 0 and (expire or new_slots) then
    redis.call('pexpire', ls.slots, left)
  end
end
