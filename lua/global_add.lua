#!lua
-- global_add.lua: feed one flush's counts into one shard's per-minute
-- Space-Saving summaries (Metwally et al., ICDT 2005), the bounded summary
-- behind the global (cross-workspace) ranking when RedisBloom is absent.
--
-- KEYS     three per minute, in order, all of one shard (one hash slot):
--            <prefix>:{g:<shard>}:ss:<minute>   sorted set, item -> count
--            <prefix>:{g:<shard>}:sse:<minute>  sorted set, item -> error
--            <prefix>:{g:<shard>}:n:<minute>    string, events counted; it grows
--                                               with every change of the minute's
--                                               summary, so readers use it as a version
-- ARGV[1]  m, the capacity of every summary
-- ARGV     then for each minute, in KEYS order:
--            expire_at   unix seconds at which the three keys expire
--            n           number of (item, weight) pairs that follow
--            item_1, weight_1, ..., item_n, weight_n
-- Reply    integer: the number of evictions.
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
-- The "#!lua" line (Redis 7 script flags, none set) makes Redis refuse the
-- script up front when it is out of memory, instead of failing it halfway.
local m = tonumber(ARGV[1])
local a = 2
local evictions = 0
for k = 1, #KEYS, 3 do
  local ss, sse, total = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local expire_at = ARGV[a]
  local n = tonumber(ARGV[a + 1])
  a = a + 2
  local min = 0
  if redis.call('ZCARD', ss) >= m then
    min = tonumber(redis.call('ZRANGE', ss, 0, 0, 'WITHSCORES')[2])
  end
  local items, weights, added = {}, {}, 0
  for j = 1, n do
    items[j], weights[j] = ARGV[a], tonumber(ARGV[a + 1])
    added = added + weights[j]
    a = a + 2
  end
  local enter, errs = {}, {}
  if n > 0 then
    local present = redis.call('ZMSCORE', ss, unpack(items))
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
  if #enter > 0 then
    redis.call('ZADD', ss, unpack(enter))
  end
  if #errs > 0 then
    redis.call('ZADD', sse, unpack(errs))
  end
  local over = redis.call('ZCARD', ss) - m
  if over > 0 then
    local popped = redis.call('ZPOPMIN', ss, over)
    local gone = {}
    for j = 1, #popped, 2 do
      gone[#gone + 1] = popped[j]
    end
    redis.call('ZREM', sse, unpack(gone))
    evictions = evictions + over
  end
  redis.call('INCRBY', total, added)
  redis.call('EXPIREAT', ss, expire_at)
  redis.call('EXPIREAT', sse, expire_at)
  redis.call('EXPIREAT', total, expire_at)
end
return evictions
