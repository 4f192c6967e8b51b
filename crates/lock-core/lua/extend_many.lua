-- Renews many single-node holds in one call, each as extend.lua would
-- (`renew` comes from renew.lua, loaded in front of it). All KEYS share one
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
-- gone or holds another value, -1 when it holds another type. One key of
-- foreign data must not fail the renewals of the others, so the WRONGTYPE
-- that extend.lua raises is caught here.
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
    replies[i + 1] = -1
  end
end
return replies
