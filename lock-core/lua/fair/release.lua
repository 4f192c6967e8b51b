-- Releases a fair lock for the hold that took it (compare-and-delete) and
-- hands it to the next waiter in line on the server (shared/handoff.lua).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter, `<prefix>{<name>}:fence`
-- KEYS[3]  the waiter queue, `<prefix>{<name>}:queue`
-- KEYS[4]  the waiters' deadlines, `<prefix>{<name>}:waiters`
-- KEYS[5]  the waiters' offers, `<prefix>{<name>}:offers`
-- ARGV[1]  the hold's value, as lock/release.lua takes it
--
-- Reply: 1 when deleted (and perhaps handed on), 0 when the key is gone or
-- holds another value; then nothing is published, and only an offer that
-- names this hold is dropped (an attempt whose reply was lost, released
-- before the waiter's next one: no release may grant it, since nobody
-- would take it up).
-- `holds`, `counter_problem`, `fencing_ok`, `line_void_offer` and
-- `hand_off` come from shared/renew.lua, shared/fencing_counter.lua, shared/queue.lua and
-- shared/handoff.lua, loaded in front.
if not holds(lock_value(KEYS[1]), ARGV[1]) then
  -- The attempt's `<owner>:<nonce>`, without a token behind it (an owner
  -- may contain '#').
  line_void_offer(KEYS[5], string.match(ARGV[1], '^(.*' .. nonce_end .. ')') or ARGV[1], '')
  return 0
end
local can_grant = fencing_ok(KEYS[2])
redis.call('del', KEYS[1])
hand_off(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], can_grant)
return 1
