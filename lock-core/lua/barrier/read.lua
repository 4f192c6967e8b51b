-- Reads a barrier without changing anything.
--
-- KEYS[1]  the lease set's sorted set
-- KEYS[2]  the lease set's entries and tallies (a hash)
-- KEYS[3]  the barrier's record, `<parties>:<round>[:open]`
-- ARGV[1]  a party's hold id, or '': whether it is live
--
-- Reply: barrier_state's (barrier/state.lua): {parties, open, entered,
-- own, wait_ms, round}, {-3, kind} when another primitive holds the name, or
-- {-2, key, detail}.
if #KEYS < 3 then
  return redis.error_reply('ERR barrier_read: three keys expected')
end
return barrier_state(KEYS[1], KEYS[2], KEYS[3], ARGV[1] or '', ls_now())
