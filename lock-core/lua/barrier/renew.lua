-- Renews a barrier's party for the TTL, if it is still live.
--
-- KEYS[1]  the lease set's sorted set
-- KEYS[2]  the lease set's entries and tallies (a hash)
-- KEYS[3]  the barrier's record, `<parties>:<round>[:open]`
-- ARGV[1]  the party's hold id
-- ARGV[2]  the TTL in ms
--
-- Reply: 1 renewed; 0 when the party is not live (its lease ended, or it
-- left) or another kind holds the name; {-2, key, detail} for foreign data
-- (nothing written).
if #KEYS < 3 then
  return redis.error_reply('ERR barrier_renew: three keys expected')
end
local ttl = ls_count(ARGV[2], 14)
if not (ARGV[1] and ttl) then
  return redis.error_reply('ERR barrier_renew: a hold id and a TTL from 1 expected')
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
if not ls_deadline(ls, ARGV[1]) or not parties then
  ls_close(ls)
  return 0
end
ls_add(ls, ARGV[1], now + ttl)
ls_close(ls)
barrier_keep(ls, KEYS[3], parties, open, round)
return 1
