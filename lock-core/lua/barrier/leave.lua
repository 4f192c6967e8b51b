-- Leaves a barrier: the party's hold out of the lease set, and its id kept
-- out for twice its TTL (an attempt of it that lands late enters
-- nothing). The last party to leave ends the round (the record goes with
-- the last hold).
--
-- KEYS[1]  the lease set's sorted set (its channel, `KEYS[1]:released`)
-- KEYS[2]  the lease set's entries and tallies (a hash)
-- KEYS[3]  the barrier's record, `<parties>:<round>[:open]`
-- KEYS[4]  the parties that left (a sorted set, barrier/state.lua)
-- ARGV[1]  the party's hold id
-- ARGV[2]  (optional) 'w' to withdraw: leave only while the round fills;
--          a party in an open round stays (it was counted: it goes on)
-- ARGV[3]  (optional) the party's TTL in ms: its id is kept out for twice
--          it even when it is not live (an attempt may still land); a live
--          party's entry says its own
--
-- Reply: {2, round} (withdrawing) when the party is in the open round
-- `round`: nothing written; 1 when the party was live and has left
-- (published on `KEYS[1]:released`, for the parties waiting for the others
-- to leave and other kinds' waiters); 0 when it was not live (kept out,
-- with ARGV[3]) or another kind holds the name; {-2, key, detail} for
-- foreign data (nothing written).
if #KEYS < 4 then
  return redis.error_reply('ERR barrier_leave: four keys expected')
end
if not ARGV[1] then
  return redis.error_reply('ERR barrier_leave: the hold id expected')
end
local id, left = ARGV[1], KEYS[4]
local ttl = nil
if ARGV[3] and ARGV[3] ~= '' then
  ttl = ls_count(ARGV[3], 14)
  if not ttl then
    return redis.error_reply('ERR barrier_leave: the TTL must be a whole number of ms from 1')
  end
end
local now = ls_now()
local parties, open, round, problem = barrier_record(KEYS[3])
if problem then
  return problem
end
problem = ls_foreign({left}, {'zset'})
if problem then
  return problem
end
local ls
ls, problem = ls_open_own('b', KEYS[1], KEYS[2], nil, now, {id})
if not ls then
  -- Another kind holds the name: this party is not in, and an attempt of
  -- it may still land once the name is free.
  if problem == 0 and ttl then
    barrier_bury(left, id, now + 2 * ttl, now)
  end
  return problem
end
local deadline = ls_deadline(ls, id)
if not deadline then
  ls_close(ls)
  if ttl then
    barrier_bury(left, id, now + 2 * ttl, now)
  end
  return 0
end
if ARGV[2] == 'w' and open and parties then
  ls_close(ls)
  return {2, round}
end
local entry = ls.entries[id]
local own = tonumber(string.match(entry or '', '^b(%d+)$')) or ttl or 60000
ls_remove(ls, id, entry, deadline)
ls_close(ls)
if parties then
  barrier_keep(ls, KEYS[3], parties, open, round)
else
  redis.call('del', KEYS[3])
end
barrier_bury(left, id, now + 2 * own, now)
redis.pcall('publish', KEYS[1] .. ':released', '1')
return 1
