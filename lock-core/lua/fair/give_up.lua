-- Takes a fair lock's waiter out of the line (it gave up waiting, or its
-- future was dropped), with its offer, and gives back a grant a release
-- made meanwhile (shared/handoff.lua) to a hold it will never take up.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  the waiter queue
-- KEYS[4]  the waiters' deadlines
-- KEYS[5]  the waiters' offers
-- ARGV[1]  the owner token (the waiter's place)
-- ARGV[2..]  the holds the waiter may have offered, `<owner>:<nonce>`:
--          its answered attempt's, and those of attempts still in flight
--          or whose replies were lost
--
-- Reply: {removed, released}: the queue entries removed (0 or 1), and 1
-- when a grant to one of the holds was given back (then handed on), else 0;
-- {-1, detail} when a key holds another type (nothing was written).
-- A waiter that left is published ('0') so the next in line tries at once.
for index, kind in ipairs({'list', 'zset', 'hash'}) do
  local found = redis.call('type', KEYS[index + 2])['ok']
  if found ~= 'none' and found ~= kind then
    return {-1, KEYS[index + 2] .. ' holds a ' .. found .. ', not a ' .. kind}
  end
end
-- Another kind's key at KEYS[1] (a sorted set, a hash) is no grant of ours.
local stored = redis.call('type', KEYS[1])['ok'] == 'string' and redis.call('get', KEYS[1])
local granted = false
for index = 2, #ARGV do
  granted = granted or holds(stored, ARGV[index])
end
local can_grant = fencing_ok(KEYS[2])
redis.call('hdel', KEYS[5], ARGV[1])
redis.call('zrem', KEYS[4], ARGV[1])
local removed = redis.call('lrem', KEYS[3], 0, ARGV[1])
if granted then
  redis.call('del', KEYS[1])
  hand_off(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], can_grant)
  return {removed, 1}
end
if removed > 0 then
  redis.pcall('publish', KEYS[1] .. ':released', '0')
end
return {removed, 0}
