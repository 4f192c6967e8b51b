-- Raises the token of a multi-key hold's members in one slot to a greater
-- one: the last step of a hold taken slot by slot on a cluster, so that all
-- its members carry one token. Only while every key still holds the value
-- it was granted with.
--
-- KEYS[1], KEYS[3], ...  each member's lock key (KEYS[2i-1] for member i)
-- KEYS[2], KEYS[4], ...  each member's fencing counter (KEYS[2i])
-- ARGV[1]  the value the keys hold, `<owner>:<nonce>#<token>`
-- ARGV[2]  the hold's value without its token, `<owner>:<nonce>`
-- ARGV[3]  the new token, greater than the old one, as text
--
-- Reply: 1 raised (each key holds `<owner>:<nonce>#<new token>` with its
-- TTL kept, and each counter is at least the new token); 0 a key no longer
-- holds ARGV[1]: nothing written.
for index = 1, #KEYS, 2 do
  if redis.call('get', KEYS[index]) ~= ARGV[1] then
    return 0
  end
end
local token = ARGV[3]
for index = 1, #KEYS, 2 do
  redis.call('set', KEYS[index], ARGV[2] .. '#' .. token, 'KEEPTTL')
  local counter = redis.call('get', KEYS[index + 1])
  if not counter or tonumber(counter) < tonumber(token) then
    redis.call('set', KEYS[index + 1], token, 'KEEPTTL')
  end
end
return 1
