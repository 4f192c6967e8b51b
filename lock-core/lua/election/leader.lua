-- Reads an election's leader without changing anything: the lock's holder
-- is the leader once it has proclaimed a value for its term.
--
-- KEYS[1]  the election's lock key
-- KEYS[2]  the leader record, `<term>:<value>` (election/proclaim.lua)
--
-- Reply: {pttl, term, value}: the lock's remaining TTL in ms (-2 when
-- nobody holds it), the holder's term as text ('' when there is none) and
-- the proclaimed value, or false when the record is not for that term (a
-- leader that has not proclaimed yet, or a record from an earlier term);
-- {-1, detail} when a key holds another type. Never the hold's value,
-- which is the holder's secret.
if #KEYS < 2 then
  return redis.error_reply('ERR election_leader: two keys expected')
end
for _, key in ipairs(KEYS) do
  local found = redis.call('type', key)['ok']
  if found ~= 'none' and found ~= 'string' then
    return {-1, key .. ' holds a ' .. found .. ', not an election'}
  end
end
local stored = redis.call('get', KEYS[1])
local term = stored and string.match(stored, '#(%d+)$') or ''
local value = false
local record = redis.call('get', KEYS[2])
if record and term ~= '' then
  local recorded, text = string.match(record, '^(%d+):(.*)$')
  if recorded == term then
    value = text
  end
end
return {redis.call('pttl', KEYS[1]), term, value}
