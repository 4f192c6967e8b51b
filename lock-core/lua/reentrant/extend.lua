-- Renews a reentrant lock for the hold that took it, whatever its count.
--
-- KEYS[1]  the lock key (a hash)
-- KEYS[2]  the fencing counter (same hash tag). If it has a TTL
--          (`fencing_counter_ttl`), it gets at least the lock's new TTL, so it
--          never expires under the lease it fences.
-- KEYS[3]  (optional: with `holder_info`) the holder information, which gets
--          the lock's TTL
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL in milliseconds, counted from now
-- ARGV[3]  the hold's fencing token, or '' for any hold of this owner. A key
--          taken again by the same owner after this hold ended has a newer
--          token, so a stale guard's extend finds it not held.
--
-- Reply: the TTL the key now has in ms (>= 1) when extended; 0 when the key is
-- gone, held by another owner, or held by a later hold of this owner.
-- The TTL only grows: every guard of the hold (outer and re-entries) trusts
-- the TTL it last set, so none may shorten it for the others.
-- A KEYS[1] that is another kind's hold of the name (a string or a sorted
-- set) answers 0; of a type no kind uses, HEXISTS fails with WRONGTYPE.
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'string' or kind == 'zset' or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if ARGV[3] ~= '' and redis.call('get', KEYS[2]) ~= ARGV[3] then
  return 0
end
local ttl = tonumber(ARGV[2])
local left = redis.call('pttl', KEYS[1])
if left < ttl then
  redis.call('pexpire', KEYS[1], ARGV[2])
  left = ttl
end
local counter_left = redis.call('pttl', KEYS[2])
if counter_left > 0 and counter_left < left then
  redis.call('pexpire', KEYS[2], left)
end
if KEYS[3] then
  redis.call('pexpire', KEYS[3], left)
end
return left
