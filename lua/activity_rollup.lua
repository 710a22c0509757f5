#!lua
-- activity_rollup.lua: fold users' closed hours into their hour and day
-- rollups.
--
-- KEYS, one per user: roll
--   roll  <prefix>:{u:<user>}:roll  hash: h (the last hour rolled up), f, l,
--         p:<hour> (hours with counts not rolled up yet; activity.lua sets them)
--   The user's other keys are named from the user's base: m:<hour> (minute hash),
--   h:<day> (hour rollups, "<type>:<hour of day>"), d:<day block> (day
--   rollups, "<type>:<unix day>"); see pkg/keys/user.go.
-- ARGV[1]  the closed hour: fold every pending hour up to it (the scheduler
--          passes the last hour whose end plus the allowed lateness passed)
-- ARGV[2]  rollup retention, seconds after the day (or day block) ends
-- ARGV     then per user, in KEYS order: base, "<prefix>:{u:<user>}:", the
--          user's key prefix
-- Reply    the number of user-hours folded.
--
-- Idempotent: an hour is folded and its p:<hour> removed in one atomic
-- step, and h moves forward only, so a second run finds nothing to do.
-- After the call h >= the closed hour, so a late count for any hour up to
-- it goes straight to the rollups (activity.lua) and never becomes pending
-- again. A user with no roll hash (deleted, or expired) is left alone.
local closed, rret = tonumber(ARGV[1]), tonumber(ARGV[2])
local folded = 0

-- fold adds the minute counts of hour into the rollups.
local function fold(base, hour)
  local m = redis.call('HGETALL', base .. 'm:' .. hour)
  if #m == 0 then
    return
  end
  local by_type = {}
  for i = 1, #m, 2 do
    local typ = string.match(m[i], '^(.*):')
    by_type[typ] = (by_type[typ] or 0) + tonumber(m[i + 1])
  end
  local day = math.floor(hour / 24)
  local block = math.floor(day / 32)
  local hk, dk = base .. 'h:' .. day, base .. 'd:' .. block
  for typ, n in pairs(by_type) do
    redis.call('HINCRBY', hk, typ .. ':' .. (hour - day * 24), n)
    redis.call('HINCRBY', dk, typ .. ':' .. day, n)
  end
  redis.call('EXPIREAT', hk, (day + 1) * 86400 + rret)
  redis.call('EXPIREAT', dk, (block + 1) * 32 * 86400 + rret)
end

for i, roll in ipairs(KEYS) do
  local marks = redis.call('HGETALL', roll)
  if #marks > 0 then
    local base = ARGV[2 + i]
    local rolled, pending = nil, {}
    for i = 1, #marks, 2 do
      local f = marks[i]
      if f == 'h' then
        rolled = tonumber(marks[i + 1])
      elseif string.sub(f, 1, 2) == 'p:' then
        local hour = tonumber(string.sub(f, 3))
        if hour <= closed then
          pending[#pending + 1] = hour
        end
      end
    end
    table.sort(pending)
    for _, hour in ipairs(pending) do
      fold(base, hour)
      redis.call('HDEL', roll, 'p:' .. hour)
      folded = folded + 1
    end
    if rolled == nil or rolled < closed then
      redis.call('HSET', roll, 'h', closed)
    end
  end
end
return folded
