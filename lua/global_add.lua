#!lua
-- global_add.lua: feed one flush's counts into one shard's per-minute
-- Space-Saving summaries (Metwally et al., ICDT 2005), the bounded summary
-- behind the global (cross-workspace) ranking when RedisBloom is absent.
--
-- The call is a sequence of groups, one per source partition of the flush
-- (every key is the one shard's, so the call is in one hash slot).
-- KEYS[1]  <prefix>:{g:<shard>}:fence        hash, source -> the last offset
--                                            whose counts the shard applied
-- KEYS     then, per group, four per minute, in order:
--            <prefix>:{g:<shard>}:ss:<minute>   sorted set, item -> count
--            <prefix>:{g:<shard>}:sse:<minute>  sorted set, item -> error
--            <prefix>:{g:<shard>}:n:<minute>    string, events counted; it grows
--                                               with every change of the minute's
--                                               summary, so readers use it as a version
--            <prefix>:{g:<shard>}:sl:<minute>   string, the minute's slack: the sum
--                                               of the weights cut (see below)
-- ARGV[1]  m, the capacity of every summary
-- ARGV     then per group: source, first, last, b (its minutes), then per
--          minute, in KEYS order:
--            expire_at   unix seconds at which the four keys expire
--            events      the group's events in the minute, cut items included
--            cut         the largest weight the caller cut from the group's
--                        items of the minute (0: none cut)
--            n           number of (item, weight) pairs that follow
--            item_1, weight_1, ..., item_n, weight_n
--          source is "<topic>/<partition>", or "" for counts with no source
--          (then no fence applies); first and last are the offsets of the
--          group's first and last record.
-- Reply    array: evictions, events skipped as already applied, then for
--          each group that straddles its fence: the group's number in the
--          call (from 1) and the fence.
--
-- Exactly once per shard and source, by fence.lua's protocol (a rebuild's
-- replay is skipped too). So a count minus its error never exceeds the true
-- count, however often the records are read.
--
-- Each minute's pairs are one batch of distinct items, merged at once
-- (a Space-Saving merge, as in Agarwal et al., "Mergeable Summaries", 2012):
-- min is the summary's smallest count if it holds m items, else 0; a
-- monitored item gains its weight; every other item enters with count
-- min + w and error min; then the smallest counts (the smallest items among
-- equal counts, ZPOPMIN's order) are evicted until m items are left. So new
-- items cost one bulk ZADD and evictions one ZPOPMIN, instead of several
-- commands each. pkg/sketch.SpaceSaving.AddBatch is the same rule in Go; a
-- test feeds both the same batches.
--
-- The caller sends only a group's heaviest items of each minute (exactly
-- counted over several flushes) and cuts the rest, each of which weighed at
-- most `cut`. The cut items are not merged; the minute's slack grows by
-- `cut` instead, so an item's true count is at most its count (or, when it
-- is not monitored, the summary's smallest count) plus the slack, and still
-- at least its count minus its error. The readers add the slack to the
-- summary's floor. Cutting the light tail makes a merge cost O(kept items)
-- whatever the number of distinct items in the stream.
--
-- The "#!lua" line (Redis 7 script flags, none set) makes Redis refuse the
-- script up front when it is out of memory, instead of failing it halfway.

-- #include fence.lua
-- #include bulk.lua

-- skip_group returns the ARGV index after the group's b minutes that start
-- at a, and the sum of their weights.
local function skip_group(a, b)
  local events = 0
  for _ = 1, b do
    events = events + tonumber(ARGV[a + 1])
    a = a + 4 + 2 * tonumber(ARGV[a + 3])
  end
  return a, events
end

-- merge merges the n pairs at ARGV[a] into one minute's summary and returns
-- the ARGV index after them and the number of evictions.
local function merge(m, ss, sse, n, a)
  local min = 0
  if redis.call('ZCARD', ss) >= m then
    min = tonumber(redis.call('ZRANGE', ss, 0, 0, 'WITHSCORES')[2])
  end
  local items, weights = {}, {}
  for j = 1, n do
    items[j], weights[j] = ARGV[a], tonumber(ARGV[a + 1])
    a = a + 2
  end
  local enter, errs = {}, {}
  if n > 0 then
    local present = bulk('ZMSCORE', ss, items)
    for j = 1, n do
      if present[j] then
        redis.call('ZINCRBY', ss, weights[j], items[j])
      else
        enter[#enter + 1] = min + weights[j]
        enter[#enter + 1] = items[j]
        if min > 0 then
          errs[#errs + 1] = min
          errs[#errs + 1] = items[j]
        end
      end
    end
  end
  bulk('ZADD', ss, enter)
  bulk('ZADD', sse, errs)
  local evictions = 0
  local over = redis.call('ZCARD', ss) - m
  if over > 0 then
    local popped = redis.call('ZPOPMIN', ss, over)
    local gone = {}
    for j = 1, #popped, 2 do
      gone[#gone + 1] = popped[j]
    end
    bulk('ZREM', sse, gone)
    evictions = over
  end
  return a, evictions
end

local fence = KEYS[1]
local m = tonumber(ARGV[1])
local k, a, group = 2, 2, 0
local evictions, skipped, overlaps = 0, 0, {}
while k <= #KEYS do
  group = group + 1
  local source, first, last, b = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  a = a + 4
  local verdict = source == '' and 'apply' or judge(redis.call('HGET', fence, source), first, last)
  if verdict ~= 'apply' then
    local events
    a, events = skip_group(a, b)
    skipped = skipped + not_applied(verdict, events, overlaps, { group })
  else
    local latest = 0
    for i = 0, b - 1 do
      local ss, sse, total, slack = KEYS[k + 4 * i], KEYS[k + 4 * i + 1], KEYS[k + 4 * i + 2], KEYS[k + 4 * i + 3]
      local expire_at, events, cut, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      local e
      a, e = merge(m, ss, sse, n, a + 4)
      evictions = evictions + e
      redis.call('INCRBY', total, events)
      redis.call('EXPIREAT', ss, expire_at)
      redis.call('EXPIREAT', sse, expire_at)
      redis.call('EXPIREAT', total, expire_at)
      if cut > 0 then
        redis.call('INCRBY', slack, cut)
        redis.call('EXPIREAT', slack, expire_at)
      end
      latest = math.max(latest, tonumber(expire_at))
    end
    if source ~= '' then
      -- The fence outlives the summaries it speaks for: once they expired,
      -- a replay of those records is too old to count anyway.
      redis.call('HSET', fence, source, last)
      raise_expiry(fence, latest)
    end
  end
  k = k + 4 * b
end
return fenced_reply({ evictions, skipped }, overlaps)
