-- Reads an election's leader without changing anything, after
-- election/state.lua, whose election_leader says the reply.
--
-- KEYS[1]  the election's lock key
-- KEYS[2]  the leader record, `<term>:<value>` (election/proclaim.lua)
--
-- Reply: what election_leader returns.
if #KEYS < 2 then
  return redis.error_reply('ERR election_leader: two keys expected')
end
return election_leader(KEYS[1], KEYS[2])
