#!lua
-- ingest.lua: add one flush's pre-aggregated counts to the minute buckets
-- and to each workspace's running window sum.
--
-- The call is a sequence of groups, one per workspace and source (a
-- workspace's counts may come from several partitions, and be spread over
-- several calls).
-- KEYS, per group: win, through, minutes, fence, roll, fold, cand, floor,
--   bucket_1 .. bucket_b
--   win       <prefix>:{w:<ws>}:win:1h          hash, the window's running sum
--             (channel -> count)
--   through   <prefix>:{w:<ws>}:win:1h:through  string, the newest minute already
--             subtracted from win (missing: none yet)
--   minutes   <prefix>:{w:<ws>}:win:1h:minutes  sorted set, the minutes added to
--             win and not yet subtracted (member = score = unix minute)
--   fence     <prefix>:{w:<ws>}:fence           hash, source -> the last offset
--             whose counts are applied
--   roll      <prefix>:{w:<ws>}:roll            hash, the rollup watermarks (rollup.lua)
--             and the hours of the long windows' sums (windows.lua)
--   fold      <prefix>:{w:<ws>}:fold            sorted set, minutes not folded yet
--   cand      <prefix>:{w:<ws>}:win:1h:cand     sorted set, the window's candidates
--   floor     <prefix>:{w:<ws>}:win:1h:floor    string, the candidates' floor
--   bucket_i  <prefix>:{w:<ws>}:m:<minute_i>    sorted set, one minute's counts
-- ARGV[1], ARGV[2]  retention of hour and day buckets, seconds
-- ARGV[3]   c: cand keeps at least the c highest counts (the scheduler's k
--           must not exceed it, or refresh.lua rescans win)
-- ARGV, then per group: base, source, first, last, b, then per bucket:
--   minute, expire_at; then p, and p parts, each: chunk, then per bucket:
--   n, member_1, increment_1, ..., member_n, increment_n
--   base      "<prefix>:{w:<ws>}:", the workspace's key prefix, which names
--             the rollups a late count also goes to: h:<hour>, d:<day>,
--             all and all:err (see pkg/keys; same hash tag, so same slot)
--   source    "<topic>/<partition>" the counts were read from, or "" for
--             counts with no source (then no fence applies)
--   first, last  the offsets of the batch's first and last record of source
--   expire_at is when the bucket leaves the window plus grace; it depends
--             only on the minute, so a late write never extends a bucket's life.
--   chunk     "" for a part that holds the group's every channel, or the
--             chunk number 0..255 of the channels it holds (pkg/store's
--             fenceChunk: FNV-1a of the channel id, mod 256)
-- Reply    array: pairs applied, events skipped as already applied, 1 if
--          the call's counts may change a long window's sum (see below;
--          else 0), then for each part that overlaps its fence: the
--          group's number in the call (from 1), the part's number in the
--          group (from 1) and the fence, or -1 for a whole part whose
--          chunks are fenced apart (the caller sends the group again in
--          chunks).
--
-- Exactly once per workspace and source, by fence.lua's protocol: the
-- fence of a whole part is field "<source>", of a chunk "<source>#<chunk>".
-- The caller splits a group larger than a call by channel into chunks, so
-- that one workspace's batch need not be one long call, and may send them
-- in separate calls in any order.
--
-- Invariant, kept together with refresh.lua: win is the sum of the buckets
-- of the minutes in `minutes`, which are the minutes after `through` that
-- have counts. A count for a minute at or before `through` (already
-- subtracted, so out of the window) goes to its bucket only.
--
-- Candidates, so that ranking needs no sorted-set update per pair: every
-- channel whose count in win is above floor is in cand, at that count
-- (a channel in cand at or below floor may hold a lower count than win's).
-- An increment that takes a count above floor writes it to cand. When cand
-- holds more than 2c channels, those below its c-th highest count leave it
-- and floor rises to the highest count that left, so cand stays small and
-- the invariant holds. Counts only grow here; refresh.lua keeps it when a
-- minute leaves the window, and reads the top K from cand.
--
-- Rollups: a minute already folded into its hour bucket (at or before
-- roll's h) also goes to the hour bucket, and one whose hour is closed (at
-- or before roll's c) also to the day bucket and the all-time summary, so
-- a late event lands in every rollup already made from its minute (the
-- hour, day and all-time keys are named from base; the
-- all-time summary takes a new item at its floor, as rollup.lua does). A
-- minute not folded yet is recorded in fold for rollup.lua.
--
-- Long windows' sums: windows.lua sums each long window's hours before
-- the current one, and records in roll, as "s:<window>", the hour it
-- summed for. Such a sum changes only when a count lands in an hour it
-- covers, so the reply says 1 when a group has counts for an hour other
-- than one of its sums', or has no sum yet: then the caller adds the
-- call's workspaces to the set the scheduler re-sums from
-- (topk:dirty:sums). Counts of the hour every sum is for, the steady
-- state, need no new sum. The verdict reads the counts' minutes, not what
-- the fences let through, so a replay after a crash before that set was
-- written says it again.
--
-- Everything happens in one atomic script, so a bucket never has counts
-- without its TTL and win never disagrees with the buckets. The "#!lua"
-- line (Redis 7 script flags, none set) makes Redis refuse the script up
-- front when it is out of memory, instead of failing it halfway.

-- #include fence.lua

-- scan_part finds the part that starts at a (after its chunk) over b
-- buckets: it returns the ARGV index after it and the index of each
-- bucket's n, skipping the pairs without reading them.
local function scan_part(a, b)
  local at = {}
  for i = 1, b do
    at[i] = a
    a = a + 1 + 2 * tonumber(ARGV[a])
  end
  return a, at
end

-- events_of returns the sum of the increments of a part (its at, over b
-- buckets): the events of a part that is skipped.
local function events_of(at, b)
  local events = 0
  for i = 1, b do
    local n = tonumber(ARGV[at[i]])
    for q = at[i] + 2, at[i] + 2 * n, 2 do
      events = events + tonumber(ARGV[q])
    end
  end
  return events
end

-- add_late adds a late count to the rollups its minute was folded into.
-- (The caller keeps roll's f, the first hour with a bucket, at or below
-- hour.)
local function add_late(base, hour, closed, floor, hret, dret, member, n)
  local h = base .. 'h:' .. hour
  redis.call('ZINCRBY', h, n, member)
  redis.call('EXPIREAT', h, (hour + 1) * 3600 + hret)
  if closed then
    local day = math.floor(hour / 24)
    local d = base .. 'd:' .. day
    redis.call('ZINCRBY', d, n, member)
    redis.call('EXPIREAT', d, (day + 1) * 86400 + dret)
    if redis.call('ZSCORE', base .. 'all', member) then
      redis.call('ZINCRBY', base .. 'all', n, member)
    else
      redis.call('ZADD', base .. 'all', floor + n, member)
      if floor > 0 then
        redis.call('ZADD', base .. 'all:err', floor, member)
      end
    end
  end
end

-- trim bounds cand (see above) and returns the floor.
local function trim(cand, floor_key, floor, c)
  local n = redis.call('ZCARD', cand)
  if n <= 2 * c then
    return floor
  end
  local cth = tonumber(redis.call('ZRANGE', cand, n - c, n - c, 'WITHSCORES')[2])
  local below = redis.call('ZRANGE', cand, '(' .. cth, '-inf', 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', 0, 1)
  if #below == 0 then
    return floor -- ties at the c-th count: keep them all
  end
  redis.call('ZREMRANGEBYSCORE', cand, '-inf', '(' .. cth)
  local left = tonumber(below[2])
  if left > floor then
    redis.call('SET', floor_key, left, 'KEEPTTL')
    return left
  end
  return floor
end

-- roll_marks reads a workspace's roll hash, a handful of fields: the
-- rollups' watermarks by name, and the hours of its long windows' sums.
local function roll_marks(roll)
  local fields = redis.call('HGETALL', roll)
  local marks, sums = {}, {}
  for j = 1, #fields, 2 do
    if string.sub(fields[j], 1, 2) == 's:' then
      sums[#sums + 1] = tonumber(fields[j + 1])
    else
      marks[fields[j]] = tonumber(fields[j + 1])
    end
  end
  return marks, sums
end

-- resums says whether counts for the b minutes from ARGV[at] (every other
-- value) may change a long window's sum, given the hours the sums are for
-- (sums; see above).
local function resums(sums, at, b)
  if #sums == 0 then
    return true
  end
  for i = 0, b - 1 do
    local hour = math.floor(tonumber(ARGV[at + 2 * i]) / 60)
    for _, h in ipairs(sums) do
      if h ~= hour then
        return true
      end
    end
  end
  return false
end

local hret, dret, c = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local k, a, group = 1, 4, 0
local applied, skipped, overlaps, resum = 0, 0, {}, 0
while k <= #KEYS do
  group = group + 1
  local win, minutes, fence = KEYS[k], KEYS[k + 2], KEYS[k + 3]
  local base, source, first, last, b = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local bucket_args = a + 5 -- minute_i, expire_at_i
  a = bucket_args + 2 * b
  local marks, sums = roll_marks(KEYS[k + 4])
  if resum == 0 and resums(sums, bucket_args, b) then
    resum = 1
  end
  -- Read every part, and judge each against its fence (one HMGET).
  local parts, fields = {}, { source, source .. '#max' }
  local p = tonumber(ARGV[a])
  a = a + 1
  for j = 1, p do
    local chunk, at = ARGV[a], nil
    a, at = scan_part(a + 1, b)
    parts[j] = { chunk = chunk, at = at }
    if chunk ~= '' then
      fields[#fields + 1] = source .. '#' .. chunk
      parts[j].field = #fields -- its fence field in the HMGET's reply
    end
  end
  local fenced = source ~= '' and redis.call('HMGET', fence, unpack(fields)) or {}
  local apply = {}
  for j, part in ipairs(parts) do
    local verdict = 'apply'
    if source ~= '' and part.field then
      verdict = judge(fenced[1], first, last, nil, fenced[part.field])
    elseif source ~= '' then
      verdict = judge(fenced[1], first, last, fenced[2])
    end
    if verdict == 'apply' then
      apply[#apply + 1] = part
    else
      skipped = skipped + not_applied(verdict, verdict == 'skip' and events_of(part.at, b) or 0, overlaps, { group, j })
    end
  end
  if #apply > 0 then
    local through = tonumber(redis.call('GET', KEYS[k + 1]))
    local roll, fold, cand, floor_key = KEYS[k + 4], KEYS[k + 5], KEYS[k + 6], KEYS[k + 7]
    local cand_floor = tonumber(redis.call('GET', floor_key)) or 0
    local folded, closed, floor, first_hour = marks.h, marks.c, marks.floor or 0, marks.f
    local latest, latest_in_win = 0, 0
    -- Counts that rose above the floor, written to cand at once (one
    -- sorted-set call instead of one per channel; a channel listed twice,
    -- for two minutes, ends at its later, higher count).
    local raised = {}
    for i = 1, b do
      local bucket = KEYS[k + 7 + i]
      local minute, expire_at = ARGV[bucket_args + 2 * (i - 1)], ARGV[bucket_args + 2 * i - 1]
      local mi = tonumber(minute)
      local in_win = through == nil or mi > through
      local hour = math.floor(mi / 60)
      local late = folded ~= nil and mi <= folded
      local hour_closed = closed ~= nil and hour <= closed
      local pairs_in = 0
      latest = math.max(latest, tonumber(expire_at))
      for _, part in ipairs(apply) do
        local at = part.at[i]
        local n = tonumber(ARGV[at])
        if n > 0 and late and (first_hour == nil or hour < first_hour) then
          first_hour = hour
          redis.call('HSET', roll, 'f', hour)
        end
        for q = at + 1, at + 2 * n, 2 do
          redis.call('ZINCRBY', bucket, ARGV[q + 1], ARGV[q])
          if in_win then
            local count = redis.call('HINCRBY', win, ARGV[q], ARGV[q + 1])
            if count > cand_floor then
              raised[#raised + 1] = count
              raised[#raised + 1] = ARGV[q]
            end
          end
          if late then
            add_late(base, hour, hour_closed, floor, hret, dret, ARGV[q], tonumber(ARGV[q + 1]))
          end
        end
        pairs_in = pairs_in + n
      end
      -- A bucket no applied part writes to is left alone: a minute in
      -- `minutes` must have counts.
      if pairs_in > 0 then
        redis.call('EXPIREAT', bucket, expire_at)
        if not late then
          redis.call('ZADD', fold, minute, minute)
          raise_expiry(fold, expire_at)
        end
        if in_win then
          redis.call('ZADD', minutes, minute, minute)
          latest_in_win = math.max(latest_in_win, tonumber(expire_at))
        end
        applied = applied + pairs_in
      end
    end
    for j = 1, #raised, 4000 do
      redis.call('ZADD', cand, unpack(raised, j, math.min(j + 3999, #raised)))
    end
    if latest_in_win > 0 then
      raise_expiry(win, latest_in_win)
      raise_expiry(minutes, latest_in_win)
      raise_expiry(cand, latest_in_win)
      if trim(cand, floor_key, cand_floor, c) > 0 then
        raise_expiry(floor_key, latest_in_win)
      end
    end
    if source ~= '' then
      -- The fence outlives the buckets it speaks for: once they expired, a
      -- replay of those records is too old to count anyway.
      local moves = {}
      for _, part in ipairs(apply) do
        if part.chunk == '' then
          moves[#moves + 1], moves[#moves + 2] = source, last
        else
          moves[#moves + 1], moves[#moves + 2] = source .. '#' .. part.chunk, last
          if (tonumber(fenced[2]) or -1) < last then
            fenced[2] = last
            moves[#moves + 1], moves[#moves + 2] = source .. '#max', last
          end
        end
      end
      redis.call('HSET', fence, unpack(moves))
      raise_expiry(fence, latest)
    end
  end
  k = k + 8 + b
end
return fenced_reply({ applied, skipped, resum }, overlaps)
