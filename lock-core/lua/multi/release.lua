-- Releases a multi-key hold: deletes every member key that holds the hold's
-- value (shared/renew.lua's `holds`) and publishes each deletion on
-- `<key>:released`, so the waiters of each member name are woken.
--
-- KEYS[1], KEYS[2], ...  each member's lock key
-- ARGV[1]  the hold's value, `<owner>:<nonce>`, with `#<token>` once granted
--
-- Reply: how many members were deleted (all of them for a hold that held
-- throughout). A key of another type is left alone.
local released = 0
for _, key in ipairs(KEYS) do
  if redis.call('type', key)['ok'] == 'string' and holds(redis.call('get', key), ARGV[1]) then
    redis.call('del', key)
    redis.pcall('publish', key .. ':released', '1')
    released = released + 1
  end
end
return released
