-- Counts a latch down by one, once per id when one is given: a count-down
-- retried after a lost reply does not count twice. At zero the latch is
-- open; it stays so, at zero, until its TTL ends.
--
-- KEYS[1]  the latch: `L<count>/<initial>` at the name's main key
--          (latch/state.lua); its channel, `KEYS[1]:released`, is where
--          waiters listen
-- KEYS[2]  the ids that counted down: a hash of id to `1`, with the
--          latch's TTL
-- ARGV[1]  the caller's id, or '' to count without one
--
-- Reply: {left, 1} when counted (`left` the count after it; at 0 the
-- opening is published); {left, 0} when nothing was counted: the latch was
-- open already, or this id counted before (its value is written again as
-- it is, so a WAIT after a retry covers what the first call wrote); {}
-- when no latch is set
-- (nothing written); {-3, kind} when another primitive holds the name,
-- {-2, key, detail} when a key holds another type (latch/state.lua's
-- latch_open; nothing written).
if #KEYS < 2 or type(ARGV[1]) ~= 'string' then
  return redis.error_reply('ERR latch_count_down: two keys and an id expected')
end
local main, downs, id = KEYS[1], KEYS[2], ARGV[1]
local count, initial, problem = latch_open(main, downs)
if problem then
  return problem
end
if not count then
  return {}
end
if count == 0 or (id ~= '' and redis.call('hexists', downs, id) == 1) then
  redis.call('set', main, 'L' .. count .. '/' .. initial, 'KEEPTTL')
  return {count, 0}
end
count = count - 1
redis.call('set', main, 'L' .. count .. '/' .. initial, 'KEEPTTL')
if id ~= '' then
  redis.call('hset', downs, id, '1')
  local left = redis.call('pttl', main)
  if left > 0 then
    redis.call('pexpire', downs, left)
  end
end
if count == 0 then
  redis.pcall('publish', main .. ':released', '0')
end
return {count, 1}
