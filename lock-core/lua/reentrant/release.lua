-- Gives back one hold of a reentrant lock; deletes the key at zero.
--
-- KEYS[1]  the lock key (a hash)
-- KEYS[2]  the fencing counter (same hash tag)
-- KEYS[3]  (optional) the holder information, deleted with the last hold
--          (single and reentrant strategies always pass it)
-- ARGV[1]  the owner token
-- ARGV[2]  the hold's fencing token, or '' for any hold of this owner (the
--          cleanup of an acquire whose reply was lost, by an owner made for
--          that attempt alone)
--
-- Reply:
--   {1, holds}    one hold released; holds is what is left (0: the key is gone)
--   {0, 0}        the key is gone, held by another owner, or held by a later
--                 hold of this owner (a newer token); nothing changed
--   {-1, detail}  this owner's hold count is not a positive integer; nothing changed
-- The last release is published on `KEYS[1]:released` for waiters, with
-- `pcall`: a user without pub/sub rights still releases.
-- A KEYS[1] that is another kind's hold of the name (a string or a sorted
-- set) answers {0, 0}; of a type no kind uses, HGET fails with WRONGTYPE.
local kind = redis.call('type', KEYS[1])['ok']
local count = kind ~= 'string' and kind ~= 'zset' and redis.call('hget', KEYS[1], ARGV[1])
if not count then
  return {0, 0}
end
if ARGV[2] ~= '' and redis.call('get', KEYS[2]) ~= ARGV[2] then
  return {0, 0}
end
local holds = tonumber(count)
if not holds or holds < 1 or holds ~= math.floor(holds) then
  return {-1, 'hold count ' .. count .. ' is not a positive integer'}
end
if holds > 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], -1)
  return {1, holds - 1}
end
redis.call('del', KEYS[1])
if KEYS[3] then
  redis.call('del', KEYS[3])
end
redis.pcall('publish', KEYS[1] .. ':released', '1')
return {1, 0}
