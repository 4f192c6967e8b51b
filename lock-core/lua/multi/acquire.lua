-- Takes several lock keys as one hold, all or nothing: each key is set to
-- the hold's value with the hold's one fencing token behind it, as a
-- single-node grant sets one (`<owner>:<nonce>#<token>`), so each member
-- name is held against plain locks of it, and they against it.
--
-- KEYS[1], KEYS[3], ...  each member's lock key (KEYS[2i-1] for member i)
-- KEYS[2], KEYS[4], ...  each member's fencing counter (KEYS[2i])
-- ARGV[1]     the hold's value, `<owner>:<nonce>`
-- ARGV[2]     the TTL in ms
-- ARGV[3]     the counters' TTL in ms after a grant (`fencing_counter_ttl`),
--             or 0: the counters never expire (shared/grant.lua's next_token)
-- ARGV[4]     (optional) the least token to issue: a hold taken slot by
--             slot on a cluster passes the token of the slots it has
--
-- The token is one greater than every member's counter (with a counter
-- TTL, at least the server's time in µs), and every member's counter is
-- set to it: a resource that fences any one member name sees it greater
-- than every earlier token of that name.
--
-- Reply:
--   {1, token}    granted (the token as text); for a retried attempt whose
--                 keys all hold its value already, its own token, the TTL
--                 set again
--   {0, pttl}     a member is held by someone else (any key there: a lock,
--                 a read-write lock, a semaphore of that name): `pttl` is
--                 the shortest time one of them has left; nothing written
--   {-1, detail}  a counter that is not a number below 2^53, or an odd
--                 number of keys: nothing written
-- An attempt that finds some of its keys holding its value and the others
-- free (a member deleted by hand) is granted afresh, with a new token.
-- Every check comes before the first write.
if #KEYS == 0 or #KEYS % 2 == 1 then
  return {-1, 'the keys must come in pairs of a lock key and its counter'}
end
local value, ttl, counter_ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3] or '0')
local floor = tonumber(ARGV[4] or '0')
if not (value and ttl and ttl >= 1 and counter_ttl and counter_ttl >= 0 and floor and floor >= 0) then
  return redis.error_reply('ERR multi_acquire: a value, a TTL from 1 and a counter TTL from 0 expected')
end
local highest, mine, shortest = 0, 0, nil
local prefix = value .. '#'
for index = 1, #KEYS, 2 do
  local kind = redis.call('type', KEYS[index])['ok']
  if kind == 'string' then
    local stored = redis.call('get', KEYS[index])
    if string.sub(stored, 1, #prefix) == prefix and string.find(stored, '^%d+$', #prefix + 1) then
      mine = mine + 1
    else
      local left = redis.call('pttl', KEYS[index])
      shortest = math.min(shortest or left, left)
    end
  elseif kind ~= 'none' then
    local left = redis.call('pttl', KEYS[index])
    shortest = math.min(shortest or left, left)
  end
  local counter = redis.call('get', KEYS[index + 1])
  if counter then
    if counter_problem(counter) or #counter > 16 or (#counter == 16 and counter >= '9007199254740992') then
      return {-1, 'the fencing counter of ' .. KEYS[index] .. ' is not a number below 2^53'}
    end
    highest = math.max(highest, tonumber(counter))
  end
end
if shortest then
  return {0, shortest}
end
local members = #KEYS / 2
if mine == members then
  -- A retried attempt: every key holds its value; renew, keep its token.
  local stored = redis.call('get', KEYS[1])
  for index = 1, #KEYS, 2 do
    redis.call('pexpire', KEYS[index], ttl)
  end
  return {1, string.sub(stored, #prefix + 1)}
end
-- Some keys hold this attempt's value and the rest are free (one was
-- deleted by hand): granted afresh below, with a new token from every
-- counter as they are now, over the keys it had.
local token = math.max(highest + 1, floor)
local keep = nil
if counter_ttl > 0 then
  local time = redis.call('time')
  local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  if now >= token then
    token = now
    keep = math.max(counter_ttl, ttl)
  end
end
local text = string.format('%.0f', token)
for index = 1, #KEYS, 2 do
  redis.call('set', KEYS[index], prefix .. text, 'PX', ttl)
  if keep then
    redis.call('set', KEYS[index + 1], text, 'PX', keep)
  else
    redis.call('set', KEYS[index + 1], text)
  end
end
return {1, text}
