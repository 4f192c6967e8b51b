-- Sets a latch's count, once: a latch that is set keeps its count, so a
-- retried set, or every party setting the same count, changes nothing.
--
-- KEYS[1]  the latch: `L<count>/<initial>` at the name's main key
--          (latch/state.lua); its channel, `KEYS[1]:released`, is where
--          waiters listen
-- KEYS[2]  the ids that counted down (a hash, latch/count_down.lua),
--          deleted when a new latch is set: they were an earlier latch's
-- ARGV[1]  the count, a whole number from 0 to 999,999,999
-- ARGV[2]  the latch's TTL in ms, from 1: the latch and its ids are
--          deleted by the server's clock once it passes
--
-- Reply: {1, count} when set (a count of 0 is published as open at once);
-- {0, count} when a latch of this initial count was set already (`count`
-- is what is left of it; its value is written again as it is, so a WAIT
-- after a retry covers what the first call wrote); {-1, initial} when the latch
-- was set with another initial count (nothing written); {-3, kind} when
-- another primitive holds the name, {-2, key, detail} when a key holds
-- another type (latch/state.lua's latch_open; nothing written). An ARGV
-- out of range is an error reply before anything is read.
if #KEYS < 2 then
  return redis.error_reply('ERR latch_set: two keys expected')
end
local main, downs = KEYS[1], KEYS[2]
local wanted, ttl = ARGV[1], ARGV[2]
if type(wanted) ~= 'string' or not string.match(wanted, '^%d+$') or #wanted > 9
    or (#wanted > 1 and string.sub(wanted, 1, 1) == '0') then
  return redis.error_reply('ERR latch_set: the count must be a whole number from 0 to 999999999')
end
if type(ttl) ~= 'string' or not string.match(ttl, '^[1-9]%d*$') or #ttl > 14 then
  return redis.error_reply('ERR latch_set: the TTL must be a whole number of ms from 1')
end
local count, initial, problem = latch_open(main, downs)
if problem then
  return problem
end
wanted = tonumber(wanted)
if count then
  if initial ~= wanted then
    return {-1, initial}
  end
  redis.call('set', main, 'L' .. count .. '/' .. initial, 'KEEPTTL')
  return {0, count}
end
redis.call('del', downs)
redis.call('set', main, 'L' .. wanted .. '/' .. wanted, 'PX', ttl)
if wanted == 0 then
  redis.pcall('publish', main .. ':released', '0')
end
return {1, wanted}
