-- Raises the token of a multi-key hold's members in one slot to a greater
-- one: the last step of a hold taken slot by slot on a cluster, so that all
-- its members carry one token. Only while every key still holds the value
-- it was granted with; it also confirms a slot whose token is already the
-- hold's (ARGV[1] then ends in the new token).
--
-- KEYS[1], KEYS[3], ...  each member's lock key (KEYS[2i-1] for member i)
-- KEYS[2], KEYS[4], ...  each member's fencing counter (KEYS[2i])
-- ARGV[1]  the value the keys hold, `<owner>:<nonce>#<token>`
-- ARGV[2]  the hold's value without its token, `<owner>:<nonce>`
-- ARGV[3]  the new token, at least the old one, as text
--
-- Reply: 1 raised (each key holds `<owner>:<nonce>#<new token>` with its
-- TTL kept, and each counter is at least the new token: kept without a TTL
-- when the token is ahead of this server's clock in µs, as shared/grant.lua keeps
-- one, since an expiry would let the clock issue lower tokens); 0 a key no
-- longer holds ARGV[1]; {-1, detail} a counter that is not a number below
-- 2^53. Every check, and TIME, comes before the first write.
local token = ARGV[3]
if not (ARGV[1] and ARGV[2] and token and string.match(token, '^[1-9]%d*$') and #token <= 16) then
  return redis.error_reply('ERR multi_raise: two values and a token expected')
end
for index = 1, #KEYS, 2 do
  -- Another kind's hold of a member's name (a hash or a sorted set) is no
  -- longer this hold; GET raises WRONGTYPE on a type no kind uses.
  local kind = redis.call('type', KEYS[index])['ok']
  if kind == 'hash' or kind == 'zset' or redis.call('get', KEYS[index]) ~= ARGV[1] then
    return 0
  end
  local counter = redis.call('get', KEYS[index + 1])
  if counter and (counter_problem(counter) or #counter > 16) then
    return {-1, 'the fencing counter of ' .. KEYS[index] .. ' is not a number below 2^53'}
  end
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
local ahead = tonumber(token) > now
for index = 1, #KEYS, 2 do
  redis.call('set', KEYS[index], ARGV[2] .. '#' .. token, 'KEEPTTL')
  local counter = redis.call('get', KEYS[index + 1])
  if not counter or tonumber(counter) < tonumber(token) then
    if ahead then
      redis.call('set', KEYS[index + 1], token)
    else
      redis.call('set', KEYS[index + 1], token, 'KEEPTTL')
    end
  end
end
return 1
