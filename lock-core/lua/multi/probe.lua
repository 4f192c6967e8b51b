-- Looks, without writing, for a member of a multi-key hold held by someone
-- else: what a hold taken slot by slot on a cluster asks every slot first,
-- so that it takes (and gives back, publishing) nothing while a later slot
-- is visibly held.
--
-- KEYS[1], KEYS[2], ...  each member's lock key
-- ARGV[1]  the hold's value without its token, `<owner>:<nonce>`
--
-- Reply: -3 when every key is free or holds this value; otherwise the
-- shortest PTTL of a key held by someone else (-1 for one without expiry).
local prefix = ARGV[1] .. '#'
local shortest = nil
for _, key in ipairs(KEYS) do
  local kind = redis.call('type', key)['ok']
  local mine = kind == 'string' and string.sub(redis.call('get', key), 1, #prefix) == prefix
  if kind ~= 'none' and not mine then
    local left = redis.call('pttl', key)
    shortest = math.min(shortest or left, left)
  end
end
return shortest or -3
