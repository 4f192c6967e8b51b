-- Prepended to the acquire scripts (lock/acquire.lua, fair/acquire.lua,
-- reentrant/acquire.lua) when they are loaded: the one check of a fencing
-- counter's text, run before the script writes anything.
--
-- counter_problem(counter): nil when the counter is absent or INCR can raise
-- it (the decimal text of an integer in [0, 2^63 - 1), with no sign, spaces
-- or leading zeros: the only text INCR accepts); otherwise what is wrong with
-- it. The check is on the text, since Lua numbers are doubles and round
-- tokens above 2^53.
local function counter_problem(counter)
  if not counter then
    return nil
  end
  if not (string.match(counter, '^[1-9]%d*$') or counter == '0') then
    return 'the fencing counter is not a non-negative integer'
  end
  if #counter > 19 or (#counter == 19 and counter >= '9223372036854775807') then
    return 'the fencing counter is at its maximum'
  end
  return nil
end
