#!lua
-- windows.lua: compute and cache workspaces' rankings over the windows
-- beyond the hour (24h, 7d, 30d, all time), from the rollups.
--
-- The call is a sequence of groups, one per workspace. On a single Redis a
-- call may carry many workspaces; in Redis Cluster it carries one.
-- KEYS, per group: roll, fold (see rollup.lua); the workspace's buckets and
--   cached results are named from roll's (see pkg/keys):
--   top:<window>, top:<window>:meta, and top:all:err for the all-time window.
-- ARGV[1]  computed_at and window_end, unix milliseconds
-- ARGV[2]  the current unix minute
-- ARGV[3]  k, the number of entries to cache
-- ARGV[4]  ttl of the cached results of finite windows, seconds; the
--          all-time results do not expire (an idle workspace's all-time
--          ranking does not change, so it is not recomputed)
-- ARGV     then per window: name, hours (0: all time)
-- Reply    array, per group: the number of entries cached per window.
--
-- A window of N hours covers the current hour and the N whole hours before
-- it. It is the sum of the fewest buckets that cover it, as one makes
-- change with coins: a day bucket for each whole day inside it whose hours
-- are all closed, an hour bucket for every other hour, and the minute
-- buckets not folded yet (fold). Each hour bucket holds exactly the
-- minutes folded into it, so no count is added twice or missed.
--
-- Bounds: a truncated bucket may lack up to its cut of any member, so a
-- member's true count lies between its count and its count plus the sum of
-- the cuts used. The all-time window adds the all-time summary (counts at
-- most their errors above the truth; a member it lacks at most the floor
-- below) to the hours and minutes not merged into it yet. top:<window>:err
-- maps each entry to its bound (the true count is within count +- bound),
-- suffixed "!" when the entry is certainly in the true top k; meta's
-- error_bound is the largest bound (0: the ranking is exact) and next the
-- count of the first member left out.
--
-- Ranking: count descending, ties by member in descending byte order, as
-- refresh.lua's.
local now_ms, minute, k, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local hour = math.floor(minute / 60)

-- cache stores the top k of the union of buckets as window name, with
-- each entry's error bound in top:<name>:err, and returns the number of
-- entries. slack is how far the true count of a member may exceed its
-- count (for every member); below(member) is how far it may fall short.
local function cache(base, name, buckets, first_ms, slack, below)
  local expire = function(key)
    if name == 'all' then
      redis.call('PERSIST', key)
    else
      redis.call('EXPIRE', key, ttl)
    end
  end
  local tmp = base .. 'tmp'
  local top, meta, errs = base .. 'top:' .. name, base .. 'top:' .. name .. ':meta', base .. 'top:' .. name .. ':err'
  redis.call('DEL', top, errs)
  local n, next = 0, 0
  if #buckets > 0 then
    redis.call('ZUNIONSTORE', tmp, #buckets, unpack(buckets))
    n = redis.call('ZRANGESTORE', top, tmp, 0, k - 1, 'REV')
    local after = redis.call('ZRANGE', tmp, k, k, 'REV', 'WITHSCORES')
    if #after > 0 then
      next = tonumber(after[2])
    end
    redis.call('DEL', tmp)
  end
  -- An entry is certainly in the true top k when its lowest possible count
  -- reaches the highest possible count of every member left out.
  local bound = 0
  if n > 0 then
    local entries = redis.call('ZRANGE', top, 0, -1, 'WITHSCORES')
    local fields = {}
    for j = 1, #entries, 2 do
      local short = below(entries[j])
      local e = math.max(short, slack)
      local v = tostring(e)
      if tonumber(entries[j + 1]) - short >= next + slack then
        v = v .. '!'
      end
      fields[#fields + 1] = entries[j]
      fields[#fields + 1] = v
      bound = math.max(bound, e)
    end
    redis.call('HSET', errs, unpack(fields))
    expire(top)
    expire(errs)
  end
  redis.call('HSET', meta, 'computed_at', now_ms, 'window_start', first_ms, 'window_end', now_ms,
    'k', k, 'error_bound', bound, 'next', next)
  expire(meta)
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

local function exact()
  return 0
end

-- span caches one window of `hours` whole hours before the current one.
-- Hours before first_hour (the first with a bucket; nil: none yet) hold
-- nothing.
local function span(base, name, hours, closed, first_hour, pending)
  local first = hour - hours
  local buckets, rolled = {}, {}
  for _, p in ipairs(pending) do
    if math.floor(p.minute / 60) >= first then
      buckets[#buckets + 1] = p.key
    end
  end
  local h = first
  if first_hour == nil then
    h = hour + 1
  elseif first_hour > h then
    h = first_hour
  end
  while h <= hour do
    if h % 24 == 0 and h + 23 <= hour and closed and h + 23 <= closed then
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
  return cache(base, name, buckets, first * 3600000, slack, exact)
end

-- all_time caches the all-time window: the summary, the hours not closed
-- yet, and the minutes not folded yet. A member the summary holds may have
-- its error fewer events than its count; one it lacks up to the floor more.
local function all_time(base, closed, floor, first_hour, pending)
  local all, all_err = base .. 'all', base .. 'all:err'
  local buckets = { all }
  for _, p in ipairs(pending) do
    buckets[#buckets + 1] = p.key
  end
  if closed and first_hour then
    for h = math.max(closed + 1, first_hour), hour do
      buckets[#buckets + 1] = base .. 'h:' .. h
    end
  end
  local function below(member)
    return tonumber(redis.call('ZSCORE', all_err, member)) or 0
  end
  local function slack_of(member)
    if redis.call('ZSCORE', all, member) then
      return 0
    end
    return floor
  end
  -- The slack differs per member; the largest (the floor) bounds those left
  -- out, and each entry reports its own.
  local n = cache(base, 'all', buckets, 0, floor, below)
  local errs = base .. 'top:all:err'
  local bound = 0
  for _, member in ipairs(redis.call('ZRANGE', base .. 'top:all', 0, -1)) do
    local v = redis.call('HGET', errs, member)
    local e = math.max(below(member), slack_of(member))
    local mark = string.sub(v, -1) == '!' and '!' or ''
    redis.call('HSET', errs, member, e .. mark)
    bound = math.max(bound, e)
  end
  -- A member the summary dropped may count up to the floor more than it
  -- shows (or be missing), so the ranking is exact only with a floor of 0.
  redis.call('HSET', base .. 'top:all:meta', 'error_bound', math.max(bound, floor))
  return n
end

local replies = {}
for i = 1, #KEYS, 2 do
  local roll, fold = KEYS[i], KEYS[i + 1]
  local base = string.sub(roll, 1, -5) -- "<prefix>:{w:<ws>}:"
  local marks = redis.call('HMGET', roll, 'c', 'floor', 'f')
  local closed, floor, first_hour = tonumber(marks[1]), tonumber(marks[2]) or 0, tonumber(marks[3])
  local pending = {}
  for _, m in ipairs(redis.call('ZRANGE', fold, 0, -1)) do
    pending[#pending + 1] = { minute = tonumber(m), key = base .. 'm:' .. m }
  end
  local counts = {}
  for j = 5, #ARGV, 2 do
    local name, hours = ARGV[j], tonumber(ARGV[j + 1])
    if hours == 0 then
      counts[#counts + 1] = all_time(base, closed, floor, first_hour, pending)
    else
      counts[#counts + 1] = span(base, name, hours, closed, first_hour, pending)
    end
  end
  replies[#replies + 1] = counts
end
return replies
