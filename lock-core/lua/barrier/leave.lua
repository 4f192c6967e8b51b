-- Leaves a barrier: the party's hold out of the lease set. The last party
-- to leave ends the round (the record goes with the last hold).
--
-- KEYS[1]  the lease set's sorted set (its channel, `KEYS[1]:released`)
-- KEYS[2]  the lease set's entries and tallies (a hash)
-- KEYS[3]  the barrier's record, `<parties>:<round>[:open]`
-- ARGV[1]  the party's hold id
-- ARGV[2]  (optional) 'w' to withdraw: leave only while the round fills;
--          a party in an open round stays (it was counted: it goes on)
--
-- Reply: 2 (withdrawing) when the party is in an open round: nothing
-- written; 1 when the party was live and has left (published on
-- `KEYS[1]:released`, for the parties waiting for the others to leave and
-- other kinds' waiters); 0 when it was not live or another kind holds the
-- name; {-2, key, detail} for foreign data (nothing written).
if #KEYS < 3 then
  return redis.error_reply('ERR barrier_leave: three keys expected')
end
if not ARGV[1] then
  return redis.error_reply('ERR barrier_leave: the hold id expected')
end
local now = ls_now()
local parties, open, round, problem = barrier_record(KEYS[3])
if problem then
  return problem
end
local ls
ls, problem = ls_open_own('b', KEYS[1], KEYS[2], nil, now, {ARGV[1]})
if not ls then
  return problem
end
local deadline = ls_deadline(ls, ARGV[1])
if not deadline then
  ls_close(ls)
  return 0
end
if ARGV[2] == 'w' and open and parties then
  ls_close(ls)
  return 2
end
ls_remove(ls, ARGV[1], ls.entries[ARGV[1]], deadline)
ls_close(ls)
if parties then
  barrier_keep(ls, KEYS[3], parties, open, round)
else
  redis.call('del', KEYS[3])
end
redis.pcall('publish', KEYS[1] .. ':released', '1')
return 1
