#!lua
-- rollup.lua: fold workspaces' closed minutes into hour buckets, and close
-- their finished hours into day buckets and the all-time summary.
--
-- The call is a sequence of groups, one per workspace. On a single Redis a
-- call may carry many workspaces; in Redis Cluster it carries one.
-- KEYS, per group: roll, fold
--   roll  <prefix>:{w:<ws>}:roll  hash, the watermarks:
--           h      the last minute folded: every minute up to it is in its
--                  hour bucket (missing: none folded yet)
--           c      the last hour closed: every hour up to it is in its day
--                  bucket and the all-time summary
--           floor  the all-time summary's floor: the most an item it lacks
--                  may have had
--           f      the first hour with an hour bucket (windows.lua reads no
--                  hour before it)
--           fm, fr a fold in chunks under way (below): the minute, and how
--                  many of its bucket's members are in the hour bucket
--   fold  <prefix>:{w:<ws>}:fold  sorted set, minutes with counts not folded
--         yet (ingest.lua adds them)
--   The workspace's other keys are named from its base:
--     m:<minute> (minute bucket), h:<hour>, h:<hour>:cut, d:<day>,
--     d:<day>:cut, all, all:err, folding (see pkg/keys).
-- ARGV[1]  the closed minute: fold every minute up to it (the scheduler
--          passes the last minute whose allowed lateness has passed)
-- ARGV[2]  m, how many members a closed hour or day bucket keeps, and the
--          capacity of the all-time summary
-- ARGV[3]  retention of hour buckets, seconds after the hour ends
-- ARGV[4]  retention of day buckets, seconds after the day ends
-- ARGV[5]  the most minutes one group folds in this call: a group with more
--          to fold (a scheduler catching up) folds the oldest ones and
--          stops there, so that no call blocks Redis for long
-- ARGV[6]  budget: the most bucket members this call adds to hour buckets,
--          over all its groups (a ZINCRBY each, or a ZUNIONSTORE weighed
--          as 0.3 per member of its result); a minute that costs more is
--          folded in chunks over several calls
-- ARGV     then per group: base, "<prefix>:{w:<ws>}:", the workspace's key
--          prefix
-- Reply    array: the number of hours closed, then the numbers (from 1) of
--          the groups that have more to fold; the caller calls again.
--
-- Idempotent: h and c only move forward, and a minute or an hour is folded
-- in the same atomic step that moves its watermark past it, so a second
-- run (or a second scheduler) finds nothing left to do. A count that
-- arrives later for a folded minute goes straight to the rollups
-- (ingest.lua), so every level always holds every count of its span that
-- it does not explicitly bound (the cut).
--
-- A fold in chunks. A minute of a million-member workspace would hold
-- Redis for seconds in one call (a ZUNIONSTORE rebuilds the whole hour
-- bucket), so a minute that costs more than a call's budget is folded a
-- chunk at a time, from its bucket's highest count down: roll's fm is the
-- minute, fr how many of its bucket's members (by rank, highest first)
-- have been added to the hour bucket, and folding holds those members at
-- the counts added. Invariant: the bucket's top fr members are exactly
-- folding's, at their bucket counts, and each is in the hour bucket. A
-- chunk adds the members ranked fr on. Counts only grow, so a member once
-- in the top fr stays there; ingest.lua keeps the invariant when a count
-- for minute fm arrives (a member of folding gains it in all three keys; a
-- member that rises into the top fr joins folding and the hour bucket with
-- its whole count, and fr grows by one). Until the last chunk, h stays
-- before fm and fm in fold, so readers of an open hour (fresh.lua,
-- windows.lua) add the bucket and subtract folding. The last chunk deletes
-- folding and moves h past fm.
--
-- Levels and bounds:
--   - an hour bucket is exact while its hour is open; when the hour closes
--     it keeps its top m members, and h:<hour>:cut records the largest
--     count it dropped: any member it lacks had at most that many;
--   - a day bucket is the sum of its closed (truncated) hours; its cut is
--     the sum of theirs and, once the day closes and keeps its top m, the
--     largest count it dropped. A member's true count in the day is thus
--     between its count and its count plus the cut;
--   - the all-time summary merges each closed hour, before truncation, as
--     Space-Saving does (Metwally et al. 2005; the merge of Agarwal et al.
--     2012): a member it holds gains the hour's count, a new member enters
--     at the floor plus its count, with the floor as its error; then it
--     keeps its m largest and the floor becomes the largest count dropped
--     if that is higher. A count is never below the true count, and at
--     most its error above it.
-- #include bulk.lua

local closed_minute = tonumber(ARGV[1])
local keep = tonumber(ARGV[2])
local hret, dret = tonumber(ARGV[3]), tonumber(ARGV[4])
local max_minutes = tonumber(ARGV[5])
local full_budget = tonumber(ARGV[6])
local budget = full_budget

-- add_into adds the members of src to dst and sets dst's expiry.
local function add_into(dst, src, expire_at)
  local n = redis.call('ZCARD', src)
  if n == 0 then
    return
  end
  if n * 4 >= redis.call('ZCARD', dst) then
    -- One pass in C; ZUNIONSTORE replaces dst, so its expiry is set below.
    redis.call('ZUNIONSTORE', dst, 2, dst, src)
  else
    local counts = redis.call('ZRANGE', src, 0, -1, 'WITHSCORES')
    for i = 1, #counts, 2 do
      redis.call('ZINCRBY', dst, counts[i + 1], counts[i])
    end
  end
  redis.call('EXPIREAT', dst, expire_at)
end

-- truncate keeps the limit largest members of key, expiring at expire_at
-- (nil: never), and returns the largest count it dropped (0 if none) and,
-- if dropped_members, the members dropped. What it keeps goes to scratch
-- key tmp, renamed over key: a new set sized for what it keeps
-- (ZREMRANGEBYRANK would keep the hash table sized for all n members:
-- twice the memory per closed hour of workload A, BENCHMARKS.md "Memory",
-- and hour buckets are kept for a month), while UNLINK frees the old one,
-- a million members for a large workspace's hour, off Redis's main thread.
local function truncate(key, tmp, limit, expire_at, dropped_members)
  local n = redis.call('ZCARD', key)
  if n <= limit then
    return 0, {}
  end
  local members = {}
  if dropped_members then
    members = redis.call('ZRANGE', key, 0, n - limit - 1)
  end
  local cut = tonumber(redis.call('ZRANGE', key, n - limit - 1, n - limit - 1, 'WITHSCORES')[2])
  redis.call('ZRANGESTORE', tmp, key, n - limit, -1)
  redis.call('UNLINK', key)
  redis.call('RENAME', tmp, key)
  if expire_at then
    redis.call('EXPIREAT', key, expire_at)
  end
  return cut, members
end

-- add_cut raises the cut of bucket by v.
local function add_cut(bucket, v, expire_at)
  if v > 0 then
    redis.call('INCRBY', bucket .. ':cut', v)
    redis.call('EXPIREAT', bucket .. ':cut', expire_at)
  end
end

-- merge_all merges the exact hour bucket into the all-time summary and
-- returns the new floor: a member the summary holds gains the hour's
-- count, one it lacks enters at the floor plus that count, with the floor
-- as its error; the summary keeps its keep largest, and the floor becomes
-- the largest count dropped if that is higher.
--
-- Only the summary's members and the hour's top keep + 1 are weighed, not
-- the whole hour (a million members for a large workspace). Any other
-- member x of the hour would enter at floor + h(x) <= floor + r, r the
-- hour's (keep+2)-th count, while the hour's top keep + 1 each reach at
-- least floor + r (a summary count is never below the floor). So x would
-- be dropped, and the largest count dropped, the (keep+1)-th merged count,
-- is the same whether x is weighed or not (at least floor + r either way):
-- the same floor, and the same members kept up to ties at the last count.
local function merge_all(base, hour_key, floor)
  local all, errs = base .. 'all', base .. 'all:err'
  local held = redis.call('ZRANGE', all, 0, -1, 'WITHSCORES')
  local count, members = {}, {}
  for i = 1, #held, 2 do
    count[held[i]] = tonumber(held[i + 1])
    members[#members + 1] = held[i]
  end
  local got = bulk('ZMSCORE', hour_key, members)
  for j, m in ipairs(members) do
    if got[j] then
      count[m] = count[m] + tonumber(got[j])
    end
  end
  local enter = {}
  local top = redis.call('ZRANGE', hour_key, 0, keep, 'REV', 'WITHSCORES')
  for i = 1, #top, 2 do
    local m = top[i]
    if count[m] == nil then
      count[m] = floor + tonumber(top[i + 1])
      members[#members + 1] = m
      if floor > 0 then
        enter[#enter + 1] = floor
        enter[#enter + 1] = m
      end
    end
  end
  local zadd = {}
  for _, m in ipairs(members) do
    zadd[#zadd + 1] = count[m]
    zadd[#zadd + 1] = m
  end
  bulk('ZADD', all, zadd)
  bulk('ZADD', errs, enter)
  local dropped_max, dropped = truncate(all, base .. 'tmp', keep, nil, true)
  bulk('ZREM', errs, dropped)
  return math.max(floor, dropped_max)
end

-- close_hour closes one hour: all-time summary, truncation, day bucket.
local function close_hour(base, hour, floor)
  local h = base .. 'h:' .. hour
  local h_expire = (hour + 1) * 3600 + hret
  floor = merge_all(base, h, floor)
  local cut = truncate(h, base .. 'tmp', keep, h_expire)
  add_cut(h, cut, h_expire)
  local day = math.floor(hour / 24)
  local d = base .. 'd:' .. day
  local d_expire = (day + 1) * 86400 + dret
  add_into(d, h, d_expire)
  add_cut(d, tonumber(redis.call('GET', h .. ':cut')) or 0, d_expire)
  return floor
end

-- close_day cuts a day bucket to its top members once its last hour closed
-- (whether or not that hour had counts).
local function close_day(base, day)
  local d = base .. 'd:' .. day
  local d_expire = (day + 1) * 86400 + dret
  add_cut(d, (truncate(d, base .. 'tmp', keep, d_expire)), d_expire)
end

-- fold_minute folds minute into its hour bucket as far as the call's
-- budget allows (see "A fold in chunks"; marks are roll's fields). It
-- returns whether the minute is folded, and whether it added anything.
local function fold_minute(base, roll, minute, marks)
  local hour = math.floor(minute / 60)
  local src, dst = base .. 'm:' .. minute, base .. 'h:' .. hour
  local expire_at = (hour + 1) * 3600 + hret
  local n = redis.call('ZCARD', src)
  local done = 0
  if marks.fm == minute then
    done = marks.fr
  else
    -- At once if it fits a call; if it fits a call but not what is left
    -- of this one, it waits for the next call.
    local cost = math.min(n, math.ceil((n + redis.call('ZCARD', dst)) * 0.3))
    if cost <= budget then
      add_into(dst, src, expire_at)
      budget = budget - cost
      return true, true
    end
    if budget < full_budget then
      return false, false
    end
  end
  local folding = base .. 'folding'
  if done < n and budget > 0 then
    local take = math.min(budget, n - done)
    local part = redis.call('ZRANGE', src, done, done + take - 1, 'REV', 'WITHSCORES')
    local enter = {}
    for i = 1, #part, 2 do
      enter[#enter + 1] = part[i + 1]
      enter[#enter + 1] = part[i]
    end
    -- folding first: a script is not rolled back, so an error must not
    -- leave counts in the hour bucket that folding does not name.
    bulk('ZADD', folding, enter)
    for i = 1, #part, 2 do
      redis.call('ZINCRBY', dst, part[i + 1], part[i])
    end
    -- folding lives as long as the bucket it mirrors part of.
    local bucket_expiry = redis.call('EXPIRETIME', src)
    if bucket_expiry > 0 then
      redis.call('EXPIREAT', folding, bucket_expiry)
    end
    redis.call('EXPIREAT', dst, expire_at)
    done, budget = done + take, budget - take
  end
  if done < n then
    redis.call('HSET', roll, 'fm', minute, 'fr', done)
    return false, true
  end
  -- UNLINK: a million-member workspace's folding is freed off the main thread.
  redis.call('UNLINK', folding)
  redis.call('HDEL', roll, 'fm', 'fr')
  return true, true
end

-- rollup does one workspace; it returns the number of hours closed and
-- whether minutes up to closed_minute are left to fold.
local function rollup(base, roll, fold)
  local m = redis.call('HMGET', roll, 'h', 'c', 'floor', 'fm', 'fr')
  local marks = { fm = tonumber(m[4]), fr = tonumber(m[5]) }
  local folded, closed, floor = tonumber(m[1]), tonumber(m[2]), tonumber(m[3]) or 0
  -- A fold whose minute is behind h (its bucket and fold entry expired
  -- while the rollup was stopped) is over: forget it.
  if marks.fm and folded and marks.fm <= folded then
    redis.call('HDEL', roll, 'fm', 'fr')
    redis.call('UNLINK', base .. 'folding')
    marks.fm, marks.fr = nil, nil
  end
  if folded and folded >= closed_minute then
    return 0, false
  end
  -- Fold at most max_minutes, within the budget; then everything before
  -- the next minute to fold is folded, and that is as far as this call
  -- goes.
  local upto = closed_minute
  local minutes = redis.call('ZRANGE', fold, '-inf', closed_minute, 'BYSCORE', 'LIMIT', 0, max_minutes + 1)
  local more = #minutes > max_minutes
  if more then
    upto = tonumber(minutes[max_minutes + 1]) - 1
    minutes[max_minutes + 1] = nil
  end
  local touched = false
  for _, minute in ipairs(minutes) do
    local done, added = fold_minute(base, roll, tonumber(minute), marks)
    touched = touched or added
    if not done then
      upto, more = tonumber(minute) - 1, true
      break
    end
  end
  if touched then
    redis.call('ZREMRANGEBYSCORE', fold, '-inf', upto)
    local first_hour = math.floor(tonumber(minutes[1]) / 60)
    local f = tonumber(redis.call('HGET', roll, 'f'))
    if f == nil or first_hour < f then
      redis.call('HSET', roll, 'f', first_hour)
    end
  end
  -- Hours wholly at or before the last minute folded can close. Before the
  -- first close, the first hour with counts bounds the scan; an hour
  -- without a bucket has nothing to close.
  local last_hour = math.floor((upto + 1) / 60) - 1
  if closed == nil then
    local first = folded or tonumber(minutes[1])
    closed = first and math.floor(first / 60) - 1 or last_hour
  end
  -- Hours past their retention need no closing (their buckets are gone).
  local from = math.max(closed + 1, last_hour - math.floor(hret / 3600))
  local n = 0
  for hour = from, last_hour do
    if redis.call('EXISTS', base .. 'h:' .. hour) == 1 then
      floor = close_hour(base, hour, floor)
      n = n + 1
    end
    if hour % 24 == 23 then
      close_day(base, math.floor(hour / 24))
    end
  end
  redis.call('HSET', roll, 'h', upto, 'c', math.max(closed, last_hour), 'floor', floor)
  return n, more
end

local reply = { 0 }
for i = 1, #KEYS, 2 do
  local n, more = rollup(ARGV[6 + (i + 1) / 2], KEYS[i], KEYS[i + 1])
  reply[1] = reply[1] + n
  if more then
    reply[#reply + 1] = (i + 1) / 2
  end
end
return reply
