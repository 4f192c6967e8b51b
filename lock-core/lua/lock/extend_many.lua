-- Renews many single-node holds in one call, each as lock/extend.lua would
-- (`renew` comes from shared/renew.lua, loaded in front of it). All KEYS share one
-- hash slot on a cluster; on a standalone server any keys may be passed.
--
-- ARGV[1]  how many KEYS each hold has, `stride`: 2 (the lock key and its
--          fencing counter) or 3 (and the holder information, with
--          `holder_info`)
-- For hold i (from 0), KEYS[i * stride + 1 ..] are its keys in that order,
-- and ARGV[2 * i + 2], ARGV[2 * i + 3] its value, `<owner>:<nonce>`, and its
-- new TTL in milliseconds.
--
-- Reply: one integer per hold, in order: 1 when extended, 0 when the key is
-- gone, holds another value or another kind's hold (shared/renew.lua's
-- `lock_value`), -1 when it holds a type no kind uses. One key of foreign
-- data must not fail the renewals of the others, so the WRONGTYPE that
-- lock/extend.lua raises is caught here; any other error (READONLY from a
-- demoted master, NOREPLICAS, OOM, NOPERM) is the whole call's, as it would
-- be for each extend: a failure to retry, never a lease found taken. The
-- holds renewed before it stay renewed, which the caller's deadlines allow
-- for (a failed renewal may have run).
local stride = tonumber(ARGV[1])
local replies = {}
for i = 0, #KEYS / stride - 1 do
  local base = i * stride
  local holder = nil
  if stride == 3 then
    holder = KEYS[base + 3]
  end
  local ok, renewed = pcall(renew, KEYS[base + 1], KEYS[base + 2], holder,
    ARGV[2 * i + 2], ARGV[2 * i + 3])
  if ok then
    replies[i + 1] = renewed
  else
    local message = renewed
    if type(renewed) == 'table' then
      message = renewed.err
    end
    message = tostring(message)
    if string.find(message, 'WRONGTYPE', 1, true) then
      replies[i + 1] = -1
    else
      return redis.error_reply(message)
    end
  end
end
return replies
