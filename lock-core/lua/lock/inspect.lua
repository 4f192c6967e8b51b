-- Reads a lock's state without changing it, after lock/state.lua, whose
-- lock_state says the reply ({pttl, counter, holder}).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- KEYS[3]  (optional) the holder information
--
-- Reply: what lock_state returns.
return lock_state(KEYS[1], KEYS[2], KEYS[3])
