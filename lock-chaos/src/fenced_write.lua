-- The fenced resource: accepts a write only if its fencing token is greater
-- than every token it accepted before, and logs every write in order.
--
-- KEYS[1]  the resource, a hash: `token` (the highest accepted), `seq`,
--          `accepted`, `refused`
-- KEYS[2]  the log, a list of `<seq> <token> <writer> <accepted 0|1>`
-- ARGV[1]  the writer's fencing token; 0 when it has none (always accepted)
-- ARGV[2]  the writer's acquisition id, `<worker>:<index>`
--
-- Reply: {accepted 0|1, seq}, seq being this write's place in the log.
local seq = redis.call('hincrby', KEYS[1], 'seq', 1)
local token = tonumber(ARGV[1])
local accepted = 1
if token > 0 then
  local last = tonumber(redis.call('hget', KEYS[1], 'token') or '0')
  if token <= last then
    accepted = 0
  else
    redis.call('hset', KEYS[1], 'token', ARGV[1])
  end
end
if accepted == 1 then
  redis.call('hincrby', KEYS[1], 'accepted', 1)
else
  redis.call('hincrby', KEYS[1], 'refused', 1)
end
redis.call('rpush', KEYS[2], seq .. ' ' .. ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. accepted)
return {accepted, seq}
