#!lua flags=no-writes
-- activity_count.lua: one user's events of one type (or all types) over a
-- range of whole minutes, from the fewest hashes and fields.
--
-- KEYS[1]  roll  <prefix>:{u:<user>}:roll  hash: h (the last hour rolled
--          up), f and l (the first and last hour counted)
--          The user's other keys are named from ARGV[4]: m:<hour>, h:<day>,
--          d:<day block> (see pkg/keys/user.go).
-- ARGV[1]  the type, or "*" for all types
-- ARGV[2]  the first unix minute of the range
-- ARGV[3]  the unix minute after the range's last
-- ARGV[4]  base, "<prefix>:{u:<user>}:", the user's key prefix
-- Reply    the number of events.
--
-- The range is cut like making change with coins: whole days, then whole
-- hours, then minutes at the edges. A whole day whose every hour is rolled
-- up is one field of its day block (d:<block>, one HMGET per block); a
-- rolled-up hour one field of its day's hour rollups (h:<day>, one HMGET
-- per day); an hour not rolled up yet, and the edges, are read from the
-- minute hash (one HMGET per hour). So the answer is exact whatever the
-- scheduler has done: what is not rolled up is read from the minutes, and
-- activity.lua keeps the rollups of rolled hours complete. The script runs
-- atomically, so the watermark and the counts it reads belong together.
-- Nothing is read outside the hours the user ever had counts in (f..l).
local base = ARGV[4]
local typ = ARGV[1]
local from, to = tonumber(ARGV[2]), tonumber(ARGV[3])
local marks = redis.call('HMGET', KEYS[1], 'h', 'f', 'l')
local rolled, fh, lh = tonumber(marks[1]), tonumber(marks[2]), tonumber(marks[3])
if fh == nil or lh == nil then
  return 0
end
from = math.max(from, fh * 60)
to = math.min(to, (lh + 1) * 60)
if from >= to then
  return 0
end
local total = 0

local function sum(key, fields)
  if #fields == 0 then
    return
  end
  for _, v in ipairs(redis.call('HMGET', key, unpack(fields))) do
    if v then
      total = total + tonumber(v)
    end
  end
end

-- minutes sums minutes [a, b) of one hour.
local function minutes(a, b)
  local hour = math.floor(a / 60)
  local fields = {}
  for m = a, b - 1 do
    fields[#fields + 1] = typ .. ':' .. (m - hour * 60)
  end
  sum(base .. 'm:' .. hour, fields)
end

-- split returns a function that sums [a, b) piece by piece: fn on each
-- part of it within one unit (an hour of minutes, a day of hours).
local function split(unit, fn)
  return function(a, b)
    while a < b do
      local e = math.min(b, (math.floor(a / unit) + 1) * unit)
      fn(a, e)
      a = e
    end
  end
end

-- minute_span sums minutes [a, b), hour by hour.
local minute_span = split(60, minutes)

-- hours sums whole hours [a, b) of one day.
local function hours(a, b)
  local day = math.floor(a / 24)
  local fields = {}
  for h = a, b - 1 do
    if rolled ~= nil and h <= rolled then
      fields[#fields + 1] = typ .. ':' .. (h - day * 24)
    else
      minutes(h * 60, h * 60 + 60)
    end
  end
  sum(base .. 'h:' .. day, fields)
end

-- hour_span sums whole hours [a, b), day by day.
local hour_span = split(24, hours)

-- days sums whole days [a, b).
local function days(a, b)
  local block, fields = nil, {}
  for d = a, b - 1 do
    if rolled ~= nil and d * 24 + 23 <= rolled then
      local bl = math.floor(d / 32)
      if bl ~= block then
        if block then
          sum(base .. 'd:' .. block, fields)
        end
        block, fields = bl, {}
      end
      fields[#fields + 1] = typ .. ':' .. d
    else
      hours(d * 24, d * 24 + 24)
    end
  end
  if block then
    sum(base .. 'd:' .. block, fields)
  end
end

local h1, h2 = math.ceil(from / 60), math.floor(to / 60) -- whole hours [h1, h2)
if h1 >= h2 then
  minute_span(from, to)
else
  minute_span(from, h1 * 60)
  local d1, d2 = math.ceil(h1 / 24), math.floor(h2 / 24) -- whole days [d1, d2)
  if d1 >= d2 then
    hour_span(h1, h2)
  else
    hours(h1, d1 * 24)
    days(d1, d2)
    hour_span(d2 * 24, h2)
  end
  minute_span(h2 * 60, to)
end
return total
