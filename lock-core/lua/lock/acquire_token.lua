-- The default fenced acquire (fencing on, a fencing counter that never
-- expires, no holder information): takes the lock if it is free and issues
-- the next fencing token in the same atomic step, with nothing else to run
-- (lock/acquire.lua does the options). The key is checked first: an attempt
-- that finds it held (by any kind) writes nothing, so the counter is always
-- the last token granted.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence` (same hash tag)
-- ARGV[1]  the hold's value, `<owner>:<nonce>`
-- ARGV[2]  the TTL in milliseconds
--
-- The lock key gets `ARGV[1]#<token>`, as lock/acquire.lua writes it. The
-- counter is made persistent: one another process gave a TTL (with
-- `fencing_counter_ttl`) would otherwise expire and restart the tokens at 1.
--
-- Reply:
--   {1, token}    acquired; an integer below 2^53, the counter's text above
--   {0, pttl}     held by someone: its remaining TTL in ms (-1: no expiry)
--   {-1, detail}  the counter holds foreign data; nothing was written (an
--                 INCR that raised a negative counter is taken back)
if redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end
-- INCR refuses anything but the decimal text of an integer, before writing.
local ok, token = pcall(redis.call, 'incr', KEYS[2])
if not ok then
  local message = tostring(type(token) == 'table' and token.err or token)
  if string.find(message, 'overflow', 1, true) then
    return {-1, 'the fencing counter is at its maximum'}
  elseif string.find(message, 'WRONGTYPE', 1, true) then
    return {-1, 'the fencing counter holds another type than a string'}
  end
  return {-1, 'the fencing counter is not a non-negative integer'}
end
if token < 1 then
  redis.call('decr', KEYS[2])
  return {-1, 'the fencing counter is not a non-negative integer'}
end
redis.call('persist', KEYS[2])
-- A Lua number is a double, exact below 2^53: above, the counter's text.
local text
if token < 9007199254740992 then
  text = string.format('%.0f', token)
else
  text = redis.call('get', KEYS[2])
  token = text
end
redis.call('set', KEYS[1], ARGV[1] .. '#' .. text, 'PX', ARGV[2])
return {1, token}
