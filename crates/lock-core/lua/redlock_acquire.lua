-- Takes a Redlock lock on one node: SET NX PX, and the holder's remaining TTL
-- when it is taken. Redlock issues no fencing token, so there is no counter.
--
-- KEYS[1]  the lock key, `<prefix>{<name>}`
-- ARGV[1]  the owner token
-- ARGV[2]  the TTL in milliseconds
--
-- Reply:
--   {1}        granted on this node
--   {0, pttl}  held by someone (this owner included): remaining TTL in ms, or -1
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1}
end
return {0, redis.call('pttl', KEYS[1])}
