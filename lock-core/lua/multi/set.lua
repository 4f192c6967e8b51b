-- Takes several lock keys as one hold on one node, all or nothing, without
-- a fencing token: what each Redlock node runs for a multi-key hold.
--
-- KEYS[1], KEYS[2], ...  each member's lock key
-- ARGV[1]  the hold's value, `<owner>:<nonce>`
-- ARGV[2]  the TTL in ms
--
-- Reply: 1 when every key was free and is now set to the value for the TTL
-- (or every key already held the value: a retried attempt, its TTL set
-- again); 0 when any key exists with something else, or only some hold
-- the value: nothing written.
local value, ttl = ARGV[1], tonumber(ARGV[2])
if not (value and ttl and ttl >= 1 and #KEYS > 0) then
  return redis.error_reply('ERR multi_set: keys, a value and a TTL from 1 expected')
end
local mine = 0
for _, key in ipairs(KEYS) do
  local kind = redis.call('type', key)['ok']
  if kind == 'string' and redis.call('get', key) == value then
    mine = mine + 1
  elseif kind ~= 'none' then
    return 0
  end
end
if mine == #KEYS then
  for _, key in ipairs(KEYS) do
    redis.call('pexpire', key, ttl)
  end
  return 1
end
if mine > 0 then
  return 0
end
for _, key in ipairs(KEYS) do
  redis.call('set', key, value, 'PX', ttl)
end
return 1
