-- Prepended to the acquire scripts (lock/acquire.lua, fair/acquire.lua,
-- reentrant/acquire.lua), after shared/fencing_counter.lua, when they are loaded:
-- how a grant issues its fencing token, how long the counter then lives, and
-- the holder information it stores.
--
-- Each acquire script takes the same five ARGV after its own, from ARGV[first]
-- (GrantOptions::script_args):
--   ARGV[first]      the fencing counter's TTL in ms after a grant
--                    (`fencing_counter_ttl`), or 0: the counter never expires
--   ARGV[first + 1]  '1' to store holder information (`holder_info`), else '0'
--   ARGV[first + 2]  the holder's host name
--   ARGV[first + 3]  the holder's process id
--   ARGV[first + 4]  the holder's label (`holder_label`), or ''
-- and the holder key, `<prefix>{<name>}:holder`, among its KEYS. Never the
-- owner token: whoever knows it can release the lock.
--
-- next_token(fence, counter, lock_ttl, counter_ttl): issues the next token of
-- the counter key `fence` for a lock just granted for `lock_ttl` ms, and
-- returns it: a number below 2^53, else the counter's decimal text (a Lua
-- number, a double, would round it, and a reply of the same token twice
-- breaks fencing). `counter` is the counter's text as GET read it (false when
-- absent), which counter_problem already accepted.
--   counter_ttl == 0 (`fencing_counter_ttl` off): INCR, as ever (1, 2, 3 ...).
--     The counter is made persistent again: one given a TTL while the option
--     was on would otherwise expire later and restart the tokens at 1.
--   counter_ttl > 0: max(counter + 1, the server's time in µs), stored with a
--     TTL of max(counter_ttl, lock_ttl) ms, unless that token is ahead of the
--     server's time: then the counter is kept without a TTL (an expiry would
--     let the time issue a lower token). Once the counter has expired the
--     next token is the server's time, which is above every earlier token
--     unless the server's clock was set back by more than the time since the
--     last grant (at least counter_ttl). Lua numbers are doubles, exact only
--     up to 2^53: a counter at or above 2^53 - 1 is raised by INCR instead,
--     and kept without a TTL.
--
-- counter_outlives(fence, lock_ttl): a counter that has a TTL gets at least
-- `lock_ttl` ms, so it never expires under the lease it fences (a renewed
-- lease can outlive counter_ttl). A counter without a TTL is left alone.
local function counter_outlives(fence, lock_ttl)
  local left = redis.call('pttl', fence)
  if left > 0 and left < lock_ttl then
    redis.call('pexpire', fence, lock_ttl)
  end
end

-- The server's time for this grant, read by read_grant_time before the
-- script writes anything: TIME can be refused (an ACL without +time), and a
-- refusal after the lock was written would leave it held by nobody, or a
-- reentrant hold without a fresh token.
local grant_time = nil

-- read_grant_time(first): reads TIME once, if the options from ARGV[first]
-- need it (a counter TTL, or holder information). Call it before any write.
local function read_grant_time(first)
  if (tonumber(ARGV[first]) or 0) > 0 or ARGV[first + 1] == '1' then
    grant_time = redis.call('time')
  end
end

-- The time read by read_grant_time (or now, if it was not).
local function grant_clock()
  return grant_time or redis.call('time')
end

-- INCR of `fence`: the number while it is below 2^53 (exact), else the text.
local function incr(fence)
  local token = redis.call('incr', fence)
  if token >= 9007199254740992 then
    return redis.call('get', fence)
  end
  return token
end

local function next_token(fence, counter, lock_ttl, counter_ttl)
  if counter_ttl == 0 then
    local token = incr(fence)
    redis.call('persist', fence)
    return token
  end
  local keep = math.max(counter_ttl, lock_ttl)
  -- 9007199254740991 is 2^53 - 1; the texts compared have the same length.
  -- Such a counter is ahead of any time in µs (until the year 2255): if it
  -- expired, the next token, the time, would be lower. It never expires.
  if counter and (#counter > 16 or (#counter == 16 and counter >= '9007199254740991')) then
    local token = incr(fence)
    redis.call('persist', fence)
    return token
  end
  local time = grant_clock()
  local now = tonumber(time[1]) * 1000000 + tonumber(time[2])
  local token = now
  if counter then
    token = math.max(tonumber(counter) + 1, now)
  end
  -- '%.0f': tostring would write 1.7e+15.
  if token > now then
    -- The counter is ahead of the clock (seeded, or the clock was set back):
    -- after an expiry the time would issue lower tokens. Keep it until a
    -- grant finds the clock past it again.
    redis.call('set', fence, string.format('%.0f', token))
  else
    redis.call('set', fence, string.format('%.0f', token), 'PX', keep)
  end
  return token
end

-- token_text(token): a token as next_token returned it, in decimal, as
-- the lock key stores it behind the hold's value (`<owner>:<nonce>#<token>`)
-- and the client writes it ('%.0f': tostring would write 1.7e+15).
local function token_text(token)
  if type(token) == 'string' then
    return token
  end
  return string.format('%.0f', token)
end

-- holder_problem(holder): nil when the holder key is absent (or not passed)
-- or a hash, else what is wrong with it. Checked before the script writes.
local function holder_problem(holder)
  if not holder then
    return nil
  end
  local kind = redis.call('type', holder)['ok']
  if kind == 'none' or kind == 'hash' then
    return nil
  end
  return 'the holder information key holds a ' .. kind .. ', not a hash'
end

-- write_holder(holder, ttl, first, value): replaces the holder information
-- of a lock just granted for `ttl` ms: an earlier holder's (left by a lock
-- deleted behind its back) is deleted, and with ARGV[first + 1] == '1' the
-- host, process id, label and the server's time in µs (hosts need no synced
-- clocks) are stored with the lock's TTL. `value` (single node: the value
-- the lock key now holds) binds them to this hold: its SHA-1 is stored as
-- `hold`, and lock/inspect.lua shows them only while the key holds that value,
-- so a later grant that writes none (a plain `SET`) never shows them.
local function write_holder(holder, ttl, first, value)
  if not holder then
    return
  end
  redis.call('del', holder)
  if ARGV[first + 1] ~= '1' then
    return
  end
  local time = grant_clock()
  local fields = {
    'host', ARGV[first + 2],
    'pid', ARGV[first + 3],
    'acquired_at_us', time[1] .. string.format('%06d', tonumber(time[2])),
  }
  if value then
    fields[#fields + 1] = 'hold'
    fields[#fields + 1] = redis.sha1hex(value)
  end
  if ARGV[first + 4] and ARGV[first + 4] ~= '' then
    fields[#fields + 1] = 'label'
    fields[#fields + 1] = ARGV[first + 4]
  end
  redis.call('hset', holder, unpack(fields))
  redis.call('pexpire', holder, ttl)
end
