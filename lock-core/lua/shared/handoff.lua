-- Prepended to fair/release.lua and fair/give_up.lua, after shared/renew.lua,
-- shared/fencing_counter.lua and shared/queue.lua: the server-side hand-off of a fair
-- lock to the next waiter in line.
--
-- A fair waiter that joins the queue leaves an offer in the `:offers` hash
-- (owner -> `<grant ms> <place deadline> <owner>:<nonce>`: how long a grant
-- runs, the deadline its place got with it, and its attempt's hold; see
-- fair/acquire.lua). A release then grants the lock to the first live
-- waiter's offer in the same atomic step, so the waiter learns it holds the
-- lock from the message and sends no acquire of its own.
--
-- fencing_ok(fence): reads the fencing counter before the caller writes
-- anything; false when INCR could not raise it (foreign data, another type,
-- its maximum). A release still deletes its own key then, but hands the lock
-- to nobody: the next waiter's own attempt reports the foreign counter.
local function fencing_ok(fence)
  local counter = redis.pcall('get', fence)
  if type(counter) == 'table' then
    return false
  end
  return counter_problem(counter) == nil
end

-- hand_off(lock, fence, queue, waiters, offers, can_grant): the lock key
-- `lock` was just deleted. Unless a line key holds another type, drops the
-- waiters whose place ran out from the head of the queue (line_head in
-- shared/queue.lua). If the first live one left an offer with its place's
-- current deadline, in its own name (line_offer), and `can_grant`
-- (fencing_ok), grants it: the next token of `fence` (INCR,
-- the counter kept without a TTL, as the default grant does), the lock key
-- set to `<owner>:<nonce>#<token>` for the waiter's lease only, and never
-- past its place's deadline (a waiter that died after its last attempt
-- blocks the lock until its place would have run out; a live one extends
-- to its TTL at once), the waiter taken out of the line,
-- and `g<SHA-1 of its hold>:<token>` published on the lock's channel (a
-- digest: the hold names the owner, which can release the lock). Otherwise
-- publishes '1' (a release), and the first waiter takes its turn with its
-- own attempt. Returns whether it granted.
local function hand_off(lock, fence, queue, waiters, offers, can_grant)
  local channel = lock .. ':released'
  if can_grant and line_waiting(queue, waiters, offers) then
    local time = redis.call('time')
    local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
    local head, deadline = line_head(queue, waiters, offers, now)
    local lease, hold
    if head then
      lease, hold = line_offer(offers, head, deadline, '')
    end
    -- A head without a current offer (fair mode with options that grant
    -- on the waiter's side, or an older client) takes its own turn.
    if lease then
      local token = redis.call('incr', fence)
      if token >= 9007199254740992 then
        token = redis.call('get', fence)
      else
        token = string.format('%.0f', token)
      end
      redis.call('persist', fence)
      -- Never past the place's own deadline: a waiter that died after its
      -- last attempt blocks the lock no longer than it held its place.
      local runs = math.min(lease, deadline - now)
      redis.call('set', lock, hold .. '#' .. token, 'PX', string.format('%d', runs))
      line_take(queue, waiters, offers, head)
      redis.pcall('publish', channel, 'g' .. redis.sha1hex(hold) .. ':' .. token)
      return true
    end
  end
  redis.pcall('publish', channel, '1')
  return false
end
