-- Renews a multi-key hold, all or nothing: only when every member key holds
-- the hold's value (shared/renew.lua's `holds`) are they all given the TTL, and
-- their counters with a TTL at least as much.
--
-- KEYS[1], KEYS[3], ...  each member's lock key (KEYS[2i-1] for member i)
-- KEYS[2], KEYS[4], ...  each member's fencing counter (KEYS[2i])
-- ARGV[1]     the hold's value, `<owner>:<nonce>#<token>`
-- ARGV[2]     the TTL in ms
-- ARGV[3]     (optional) "1" when KEYS are the lock keys alone, without
--             counters (a Redlock node's multi-key hold)
--
-- Reply: 1 renewed; 0 a member is gone or held by another hold (nothing
-- changed: losing one member loses the hold), another kind's hold of a
-- member's name included (shared/renew.lua's `lock_value`).
local stride = ARGV[3] == '1' and 1 or 2
for index = 1, #KEYS, stride do
  if not holds(lock_value(KEYS[index]), ARGV[1]) then
    return 0
  end
end
for index = 1, #KEYS, stride do
  renew(KEYS[index], stride == 2 and KEYS[index + 1] or nil, nil, ARGV[1], ARGV[2])
end
return 1
