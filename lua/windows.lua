#!lua
-- windows.lua: sum the closed part of workspaces' windows beyond the hour
-- (24h, 7d, 30d, all time) from the rollups, at each window's cadence.
-- fresh.lua adds the current hour to these sums at every tick, so every
-- window is as fresh as the hour's ranking while the long unions run rarely.
--
-- The call is a sequence of groups, one per workspace. On a single Redis a
-- call may carry many workspaces; in Redis Cluster it carries one.
-- KEYS, per group: roll, fold (see rollup.lua); the workspace's buckets
--   (m:<minute>, h:<hour>, d:<day>, all, all:err) and its window sums are
--   named from its base (see pkg/keys): base:<window> (sorted set, member
--   -> count), base:<window>:meta (hash: hour, window_start, slack, next)
--   and, for the all-time window only, base:all:err (hash, member ->
--   "below,above"); tmp, a scratch key deleted before the call ends.
-- ARGV[1]  computed_at, unix milliseconds
-- ARGV[2]  the current unix minute
-- ARGV[3]  keep, the members kept in each sum
-- ARGV[4]  ttl of the sums of finite windows, seconds; the all-time sums do
--          not expire (an idle workspace's all-time sum does not change)
-- ARGV[5]  w, the number of windows
-- ARGV     then per window: name, hours (0: all time); then the open
--          limit (below); then per group: base, "<prefix>:{w:<ws>}:", the
--          workspace's key prefix
-- Reply    array, per group: the members kept per window, or -1 for each
--          when the group waits for its open hours to close (below).
--
-- Short calls. Before H all hours are closed but those the rollup has not
-- closed yet: at a new hour, the hour that just ended, whose bucket is
-- exact and whose last minutes are not even folded. For a large workspace
-- that is a million-member union per window, seconds of Redis in one call.
-- So a workspace whose buckets not closed yet (hour buckets after roll's
-- c, minute buckets before H not folded) hold more members than the open
-- limit waits: nothing is written, its sums stay for the hour before (so
-- fresh.lua keeps its rankings as they were) and the caller asks again
-- until the rollup closed those hours, about 95 s into the hour. Its
-- sums then read the closed hour cut to keep members, with the cut in the
-- slack, a little less exact than the full hour but never wrong.
--
-- A window of N hours at hour H covers H and the N whole hours before it.
-- Its sum here is of the hours before H only: the fewest buckets that
-- cover them, as one makes change with coins: a day bucket for each whole
-- day inside it whose hours are all closed, an hour bucket for every other
-- hour, and the minute buckets of those hours not folded yet (fold). Each
-- hour bucket holds exactly the minutes folded into it, so no count is
-- added twice or missed; while a minute is folded in chunks (rollup.lua),
-- its part already in the hour bucket (folding) is subtracted. meta's hour
-- is H: the sum is for that hour only. roll's "s:<window>" says so too,
-- for ingest.lua, which tells the scheduler about counts that may change a
-- sum (for another hour).
--
-- Bounds: a truncated bucket may lack up to its cut of any member, so a
-- member's true count lies between its count and its count plus the sum of
-- the cuts used (meta's slack). The all-time window adds the all-time
-- summary (counts at most their errors above the truth; a member it lacks
-- at most the floor below) to the hours and minutes not merged into it
-- yet: base:all:err holds each kept member's "below,above" when not 0,0.
-- The sum keeps its top `keep` members; next is the count of the first
-- member left out (0: none), so a member it lacks had at most next + slack.
-- #include bulk.lua

local now_ms, minute, keep, ttl, nwin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local hour = math.floor(minute / 60)

-- store keeps the top `keep` members of the union of buckets, less
-- minus (nil: nothing), as window name's sum, with its meta, and returns
-- the members kept.
local function store(base, name, buckets, minus, first_ms, slack)
  local sum, meta = base .. 'base:' .. name, base .. 'base:' .. name .. ':meta'
  local tmp = base .. 'tmp'
  redis.call('DEL', sum)
  local n, next = 0, 0
  if #buckets > 0 then
    if minus then
      local args = { tmp, #buckets + 1 }
      for _, b in ipairs(buckets) do
        args[#args + 1] = b
      end
      args[#args + 1] = minus
      args[#args + 1] = 'WEIGHTS'
      for _ = 1, #buckets do
        args[#args + 1] = 1
      end
      args[#args + 1] = -1
      redis.call('ZUNIONSTORE', unpack(args))
    else
      redis.call('ZUNIONSTORE', tmp, #buckets, unpack(buckets))
    end
    -- ZRANGESTORE onto a fresh key sizes it for the members kept, not for
    -- the whole union.
    n = redis.call('ZRANGESTORE', sum, tmp, 0, keep - 1, 'REV')
    local after = redis.call('ZRANGE', tmp, keep, keep, 'REV', 'WITHSCORES')
    if #after > 0 then
      next = tonumber(after[2])
    end
    redis.call('DEL', tmp)
  end
  redis.call('HSET', meta, 'hour', hour, 'computed_at', now_ms, 'window_start', first_ms, 'slack', slack, 'next', next)
  for _, key in ipairs({ sum, meta }) do
    if name == 'all' then
      redis.call('PERSIST', key)
    else
      redis.call('EXPIRE', key, ttl)
    end
  end
  return n
end

-- cuts returns the sum of the cuts of buckets (a bucket that dropped
-- nothing has none), in one MGET.
local function cuts(buckets)
  local sum = 0
  for i = 1, #buckets, 1000 do
    local keys = {}
    for j = i, math.min(i + 999, #buckets) do
      keys[#keys + 1] = buckets[j] .. ':cut'
    end
    for _, v in ipairs(redis.call('MGET', unpack(keys))) do
      sum = sum + (tonumber(v) or 0)
    end
  end
  return sum
end

-- add_pending appends to buckets the pending minute buckets from minute
-- from to the current hour, and returns folding when the minute folded in
-- chunks (fm) is among them, to be subtracted (nil otherwise).
local function add_pending(base, buckets, pending, fm, from)
  local minus
  for _, p in ipairs(pending) do
    if p.minute >= from and p.minute < hour * 60 then
      buckets[#buckets + 1] = p.key
      if p.minute == fm then
        minus = base .. 'folding'
      end
    end
  end
  return minus
end

-- span sums the `hours` whole hours before the current one. Hours before
-- first_hour (the first with a bucket; nil: none yet) hold nothing.
local function span(base, name, hours, closed, first_hour, pending, fm)
  local first = hour - hours
  local buckets, rolled = {}, {}
  local minus = add_pending(base, buckets, pending, fm, first * 60)
  local h = first
  if first_hour == nil then
    h = hour + 1
  elseif first_hour > h then
    h = first_hour
  end
  while h < hour do
    if h % 24 == 0 and h + 23 < hour and closed and h + 23 <= closed then
      rolled[#rolled + 1] = base .. 'd:' .. math.floor(h / 24)
      h = h + 24
    else
      rolled[#rolled + 1] = base .. 'h:' .. h
      h = h + 1
    end
  end
  local slack = cuts(rolled)
  for _, b in ipairs(rolled) do
    buckets[#buckets + 1] = b
  end
  return store(base, name, buckets, minus, first * 3600000, slack)
end

-- all_time sums the all-time window before the current hour: the
-- summary, the hours not closed yet, and their minutes not folded yet. A
-- member the summary holds may have its error fewer events than its
-- count; one it lacks up to the floor more.
local function all_time(base, closed, floor, first_hour, pending, fm)
  local all, all_err = base .. 'all', base .. 'all:err'
  local buckets = { all }
  local minus = add_pending(base, buckets, pending, fm, -math.huge)
  if closed and first_hour then
    for h = math.max(closed + 1, first_hour), hour - 1 do
      buckets[#buckets + 1] = base .. 'h:' .. h
    end
  end
  local n = store(base, 'all', buckets, minus, 0, floor)
  local errs = base .. 'base:all:err'
  redis.call('DEL', errs)
  local members = redis.call('ZRANGE', base .. 'base:all', 0, -1)
  if #members == 0 then
    return n
  end
  local below = bulk('ZMSCORE', all_err, members)
  local held = bulk('ZMSCORE', all, members)
  local fields = {}
  for j, member in ipairs(members) do
    local b, a = tonumber(below[j]) or 0, 0
    if not held[j] then
      a = floor
    end
    if b > 0 or a > 0 then
      fields[#fields + 1] = member
      fields[#fields + 1] = b .. ',' .. a
    end
  end
  bulk('HSET', errs, fields)
  redis.call('PERSIST', errs)
  return n
end

local open_limit = tonumber(ARGV[6 + 2 * nwin])

-- open_members counts the members of a workspace's buckets before the
-- current hour that are not closed yet: hour buckets after closed (from
-- its first, with none closed yet) and the pending minute buckets.
local function open_members(base, closed, first_hour, pending)
  local n = 0
  for _, p in ipairs(pending) do
    if p.minute < hour * 60 then
      n = n + redis.call('ZCARD', p.key)
    end
  end
  local from = first_hour
  if closed then
    from = closed + 1
  end
  if from then
    for h = from, hour - 1 do
      n = n + redis.call('ZCARD', base .. 'h:' .. h)
    end
  end
  return n
end

local replies = {}
for i = 1, #KEYS, 2 do
  local roll, fold = KEYS[i], KEYS[i + 1]
  local base = ARGV[7 + 2 * nwin + (i - 1) / 2]
  local marks = redis.call('HMGET', roll, 'c', 'floor', 'f', 'fm')
  local closed, floor, first_hour, fm = tonumber(marks[1]), tonumber(marks[2]) or 0, tonumber(marks[3]), tonumber(marks[4])
  local pending = {}
  for _, m in ipairs(redis.call('ZRANGE', fold, 0, -1)) do
    pending[#pending + 1] = { minute = tonumber(m), key = base .. 'm:' .. m }
  end
  local counts, summed = {}, {}
  if open_members(base, closed, first_hour, pending) > open_limit then
    for _ = 1, nwin do
      counts[#counts + 1] = -1
    end
  else
    for j = 6, 5 + 2 * nwin, 2 do
      local name, hours = ARGV[j], tonumber(ARGV[j + 1])
      if hours == 0 then
        counts[#counts + 1] = all_time(base, closed, floor, first_hour, pending, fm)
      else
        counts[#counts + 1] = span(base, name, hours, closed, first_hour, pending, fm)
      end
      summed[#summed + 1], summed[#summed + 2] = 's:' .. name, hour
    end
    redis.call('HSET', roll, unpack(summed))
  end
  replies[#replies + 1] = counts
end
return replies
