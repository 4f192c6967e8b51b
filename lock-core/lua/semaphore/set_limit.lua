-- Stores a semaphore's limit, whatever it was (an operator's explicit
-- change), and wakes its waiters: a raised limit may let them in.
--
-- KEYS[1]  the permits (a sorted set; see semaphore/common.lua): its channel,
--          `KEYS[1]:released`, is where waiters listen
-- KEYS[2]  the limit (a string)
-- ARGV[1]  the new limit, from 1 to 999,999,999
--
-- Reply: {1, previous}, previous being 0 when none was stored; {-2, key,
-- detail} when the limit's key holds another type or a value that does
-- not parse (nothing written). An ARGV that is not a whole number from 1 is
-- an error reply before anything is read. Live permits keep their weight
-- and slots: acquires after a lower limit wait until the live weight fits.
if #KEYS < 2 then
  return redis.error_reply('ERR semaphore_set_limit: two keys expected')
end
local permits, limit_key = KEYS[1], KEYS[2]
local limit = ls_count(ARGV[1], 9)
if not limit then
  return redis.error_reply('ERR semaphore_set_limit: the limit must be a whole number from 1')
end
local foreign = ls_foreign({permits, limit_key}, {'zset', 'string'})
if foreign then
  return foreign
end
local stored = redis.call('get', limit_key)
if stored and not ls_count(stored, 9) then
  return {-2, limit_key, 'the limit is not a whole number from 1'}
end
redis.call('set', limit_key, ARGV[1])
redis.pcall('publish', permits .. ':released', 0)
return {1, tonumber(stored) or 0}
