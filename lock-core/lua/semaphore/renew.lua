-- Renews one live permit to a TTL from now; never revives one that has
-- ended (expired, or released).
--
-- KEYS[1]  the permits (the lease set's sorted set; see semaphore/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the free slots (a sorted set; see lease_set/common.lua)
-- ARGV[1]  the permit id
-- ARGV[2]  the TTL in ms
--
-- Reply: 1 when renewed; 0 when the permit is not live (nothing renewed);
-- {-2, key, detail} when a key holds another type (nothing written).
-- Missing KEYS or a TTL that is not a whole number from 1 is an error reply
-- before anything is read. The cost is in the expired permits swept.
if #KEYS < 3 then
  return redis.error_reply('ERR semaphore_renew: three keys expected')
end
local ttl = ls_count(ARGV[2], 14)
if not (ARGV[1] and ttl) then
  return redis.error_reply('ERR semaphore_renew: the TTL must be a whole number from 1')
end
local now = ls_now()
local ls, problem = ls_open_own('p', KEYS[1], KEYS[2], KEYS[3], now, {ARGV[1]})
if not ls then
  return problem
end
local renewed = 0
if ls_deadline(ls, ARGV[1]) then
  ls_add(ls, ARGV[1], now + ttl)
  renewed = 1
end
ls_close(ls)
return renewed
