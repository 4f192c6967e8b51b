-- Takes over a single-node lock for a new hold of the same lease: the hold
-- that has it (as a hand-off token names it) is replaced by a new value and
-- renewed, in one step, so commands still in flight for the old value, and
-- any other copy of the token, act on nothing from then on.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence` (same slot): if it
--          has a TTL (`fencing_counter_ttl`), it gets at least the new TTL,
--          as on every renewal
-- KEYS[3]  (optional: with `holder_info`) the holder information, which gets
--          the new TTL (it still names the process that acquired the lock)
--          and is bound to the new value, if it was bound to the old one
--          (shared/grant.lua's write_holder)
-- ARGV[1]  the old hold's value as the hand-off token names it:
--          `<owner>:<nonce>`, with `#<token>` behind it when the token claims
--          a fencing token
-- ARGV[2]  the new hold's value, the same claim behind its new nonce
-- ARGV[3]  the TTL in milliseconds
--
-- Reply: 1 when taken over; 0 when the key is gone or holds another value.
-- Every fenced grant stores the token it issued in the key's value
-- (lock/acquire.lua, lock/acquire_token.lua), so a hand-off token that claims another
-- token than its hold was granted, or a token for a hold granted none,
-- names no value and takes over nothing, nor does another kind's hold of
-- the name (a hash or a sorted set). A key of a type no kind uses makes
-- GET fail with WRONGTYPE, before any write.
local kind = redis.call('type', KEYS[1])['ok']
local stored = kind ~= 'hash' and kind ~= 'zset' and redis.call('get', KEYS[1])
if stored ~= ARGV[1] then
  return 0
end
-- Only holder information bound to this hold follows it: a hash an earlier
-- hold left behind stays unbound (read before any write).
local bound = KEYS[3] and redis.call('type', KEYS[3])['ok'] == 'hash'
  and redis.call('hget', KEYS[3], 'hold') == redis.sha1hex(ARGV[1])
redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
local left = redis.call('pttl', KEYS[2])
if left > 0 and left < tonumber(ARGV[3]) then
  redis.call('pexpire', KEYS[2], ARGV[3])
end
if bound then
  redis.call('pexpire', KEYS[3], ARGV[3])
  redis.call('hset', KEYS[3], 'hold', redis.sha1hex(ARGV[2]))
end
return 1
