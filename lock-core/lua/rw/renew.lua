-- Renews a live hold of a read-write lock to a deadline of the TTL from
-- now; never one that ended: an expired hold is dropped first, and renews
-- as not held.
--
-- KEYS[1]  the holds (the lease set's sorted set; see rw/common.lua)
-- KEYS[2]  the held entries and tallies (a hash)
-- KEYS[3]  the lease set's slots (a semaphore's; swept permits free theirs)
-- KEYS[4]  (optional) the write counter: one with a TTL is kept at least
--          as long as the last live hold
-- ARGV[1]  the hold id
-- ARGV[2]  the TTL in ms
--
-- Reply: 1 renewed; 0 the hold is not live (nothing renewed); {-2, key,
-- type} a key holds another type (nothing written).
if #KEYS < 3 then
  return redis.error_reply('ERR rw_renew: three keys expected')
end
local ttl = ls_count(ARGV[2], 14)
if not (ARGV[1] and ttl) then
  return redis.error_reply('ERR rw_renew: the TTL must be a whole number from 1')
end
local now = ls_now()
local ls, problem = ls_open_own('rw', KEYS[1], KEYS[2], KEYS[3], now, {ARGV[1]})
if not ls then
  return problem
end
local renewed = 0
if ls_deadline(ls, ARGV[1]) then
  ls_add(ls, ARGV[1], now + ttl)
  renewed = 1
end
ls_close(ls)
rw_counter_outlives(ls, KEYS[4])
return renewed
