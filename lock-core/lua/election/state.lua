-- Prepended to the election scripts: their type check, and the leader read.

-- election_foreign(keys): the reply {-1, detail} for the first of `keys`
-- that holds something other than a string; nil when none does.
local function election_foreign(keys)
  for _, key in ipairs(keys) do
    local found = redis.call('type', key)['ok']
    if found ~= 'none' and found ~= 'string' then
      return {-1, key .. ' holds a ' .. found .. ', not an election'}
    end
  end
  return nil
end

-- election_leader(lock, record): the election's leader, without changing
-- anything: the lock's holder is the leader once it has proclaimed a value
-- for its term. The reply is {pttl, term, value}: the lock's remaining TTL
-- in ms (-2 when nobody holds it), the holder's term as text ('' when there
-- is none) and the proclaimed value, or false when the record is not for
-- that term (a leader that has not proclaimed yet, or a record from an
-- earlier term); {-1, detail} when a key holds another type. Never the
-- hold's value, which is the holder's secret.
local function election_leader(lock, record)
  local foreign = election_foreign({lock, record})
  if foreign then
    return foreign
  end
  local stored = redis.call('get', lock)
  local term = stored and string.match(stored, '#(%d+)$') or ''
  local value = false
  local proclaimed = redis.call('get', record)
  if proclaimed and term ~= '' then
    local recorded, text = string.match(proclaimed, '^(%d+):(.*)$')
    if recorded == term then
      value = text
    end
  end
  return {redis.call('pttl', lock), term, value}
end
