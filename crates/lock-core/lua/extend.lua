-- Renews a single-node (or one Redlock node's) lock for the hold that took it
-- (compare-and-extend).
--
-- KEYS[1]  the lock key
-- KEYS[2]  (optional: single node with `fencing_counter_ttl` or `holder_info`)
--          the fencing counter: if it has a TTL, it gets at least the new TTL,
--          so it never expires under the lease it fences
-- KEYS[3]  (optional: single node with `holder_info`) the holder information,
--          which gets the new TTL
-- Keys are passed only when needed: in a cluster, a slot migration that
-- splits a script's keys answers TRYAGAIN.
-- ARGV[1]  the hold's value, `<owner>:<nonce>`
-- ARGV[2]  the new TTL in milliseconds, counted from now; it replaces the old
--          one, shorter or longer, and the holder's deadline follows it
--
-- Reply: 1 when extended, 0 when the key is gone or holds another value (a
-- later hold of the same owner included).
-- A key of another type (not a string) makes GET fail with WRONGTYPE.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  if KEYS[2] then
    local left = redis.call('pttl', KEYS[2])
    if left > 0 and left < tonumber(ARGV[2]) then
      redis.call('pexpire', KEYS[2], ARGV[2])
    end
  end
  if KEYS[3] then
    redis.call('pexpire', KEYS[3], ARGV[2])
  end
  return 1
end
return 0
