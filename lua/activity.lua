#!lua
-- activity.lua: add one batch's pre-aggregated activity counts to users'
-- minute hashes (one hash per user-hour, 60 minute fields per type).
--
-- The call is a sequence of groups, one per user and source. On a single
-- Redis a call may carry many users; in Redis Cluster, users of one slot.
-- KEYS, per group: fence, roll, minutes_1 .. minutes_n
--   fence      <prefix>:{u:<user>}:fence   hash, source -> the last offset of
--              the user's records whose counts are applied
--   roll       <prefix>:{u:<user>}:roll    hash: h (the last hour rolled up),
--              f, l (first and last hour counted), p:<hour> (hours with
--              counts not rolled up yet); see activity_rollup.lua
--   minutes_i  <prefix>:{u:<user>}:m:<hour_i>  hash, "<type>:<minute of hour>"
--              and "*:<minute of hour>" -> events
--   The rollup keys h:<day> and d:<day block> are named from base (same
--   hash tag, so the same slot).
-- ARGV[1]  minute retention, seconds after the hour ends
-- ARGV[2]  rollup retention, seconds after the day (or day block) ends
-- ARGV, then per group: base, source, first, last, n, then per hour:
--   hour, p, field_1, count_1, ..., field_p, count_p
--   base         "<prefix>:{u:<user>}:", the user's key prefix (see
--                pkg/keys/user.go)
--   source       "<topic>/<partition>", or "" for counts with no source
--                (then no fence applies)
--   first, last  the offsets of the user's first and last record of source
--                in the group
--   fields       "<type>:<minute of hour>", and "*:<minute of hour>" with the
--                minute's total over all types (the caller sums them)
-- Reply    array: events applied, events skipped as already applied, events
--          dropped because their hour's minute hash had expired, then for
--          each group that overlaps its fence: its number in the call (from
--          1) and the fence.
--
-- Exactly once per user and source, by fence.lua's protocol (the caller
-- keeps each record's offset, to recount a group that straddles its fence).
--
-- An hour whose minute hash has expired (hour end + retention before now,
-- by Redis's clock) is dropped: its hash would be deleted at once anyway,
-- and adding it to a rollup could count twice a replay older than its
-- fence (which lives as long as the minute hashes it covers).
--
-- Late events: an hour at or before roll's h is already rolled up, so its
-- counts also go to the hour and day rollups; a later hour is recorded as
-- pending (p:<hour>) for activity_rollup.lua. Either way every rollup
-- always holds every count of its hours up to h, and the minute hash every
-- count of its hour, whichever order the scheduler and a late batch run in.
local mret, rret = tonumber(ARGV[1]), tonumber(ARGV[2])
local now = tonumber(redis.call('TIME')[1])

-- #include fence.lua

-- events_of returns the sum of the "*:" counts of the p pairs at a, and the
-- index after them.
local function events_of(a, p)
  local events = 0
  for _ = 1, p do
    if string.byte(ARGV[a], 1) == 42 then -- '*'
      events = events + tonumber(ARGV[a + 1])
    end
    a = a + 2
  end
  return a, events
end

-- add_late adds a count of a rolled-up hour to its hour and day rollups.
local function add_late(base, hour, field, n)
  local typ = string.match(field, '^(.*):')
  local day = math.floor(hour / 24)
  local block = math.floor(day / 32)
  local hk, dk = base .. 'h:' .. day, base .. 'd:' .. block
  redis.call('HINCRBY', hk, typ .. ':' .. (hour - day * 24), n)
  redis.call('EXPIREAT', hk, (day + 1) * 86400 + rret)
  redis.call('HINCRBY', dk, typ .. ':' .. day, n)
  redis.call('EXPIREAT', dk, (block + 1) * 32 * 86400 + rret)
end

local k, a, group = 1, 3, 0
local applied, skipped, expired, overlaps = 0, 0, 0, {}
while k <= #KEYS do
  group = group + 1
  local fence, roll = KEYS[k], KEYS[k + 1]
  local base, source, first, last, nh = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  a = a + 5
  local verdict = source == '' and 'apply' or judge(redis.call('HGET', fence, source), first, last)
  if verdict ~= 'apply' then
    local events = 0
    for _ = 1, nh do
      local e
      a, e = events_of(a + 2, tonumber(ARGV[a + 1]))
      events = events + e
    end
    skipped = skipped + not_applied(verdict, events, overlaps, { group })
  else
    local marks = redis.call('HMGET', roll, 'h', 'f', 'l')
    local rolled, fh, lh = tonumber(marks[1]), tonumber(marks[2]), tonumber(marks[3])
    local fh0, lh0 = fh, lh
    local latest, roll_expiry = 0, 0
    for i = 1, nh do
      local key = KEYS[k + 1 + i]
      local hour, p = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
      a = a + 2
      local expire_at = (hour + 1) * 3600 + mret
      if expire_at <= now then
        local e
        a, e = events_of(a, p)
        expired = expired + e
      else
        local late = rolled ~= nil and hour <= rolled
        for _ = 1, p do
          local field, n = ARGV[a], tonumber(ARGV[a + 1])
          a = a + 2
          redis.call('HINCRBY', key, field, n)
          if string.byte(field, 1) == 42 then
            applied = applied + n
          end
          if late then
            add_late(base, hour, field, n)
          end
        end
        -- The hash got its expiry when its hour first became pending (the
        -- expiry depends on the hour alone); a late count finds it set too.
        if not late and redis.call('HSET', roll, 'p:' .. hour, 1) == 1 then
          redis.call('EXPIREAT', key, expire_at)
        end
        if fh == nil or hour < fh then fh = hour end
        if lh == nil or hour > lh then lh = hour end
        latest = math.max(latest, expire_at)
        local day = math.floor(hour / 24)
        roll_expiry = math.max(roll_expiry, (math.floor(day / 32) + 1) * 32 * 86400 + rret)
      end
    end
    if latest > 0 then
      -- roll outlives every rollup it speaks for; the fence every minute
      -- hash it covers (past them, a replay is dropped as expired). Both
      -- expiries grow with the newest hour, so they move only when l does:
      -- a group of older hours finds them far enough already (if the fence
      -- had expired, so would those hours' minute hashes, dropped above).
      local newest = lh ~= lh0
      if fh ~= fh0 or newest then
        redis.call('HSET', roll, 'f', fh, 'l', lh)
      end
      if newest then
        raise_expiry(roll, roll_expiry)
      end
      -- (A source new to the fence may have created it: it needs one too.)
      if source ~= '' and (redis.call('HSET', fence, source, last) == 1 or newest) then
        raise_expiry(fence, latest)
      end
    end
  end
  k = k + 2 + nh
end
return fenced_reply({ applied, skipped, expired }, overlaps)
