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
-- Each (item, w), in order: a monitored item gains w; else, while fewer than
-- m items are monitored, it enters with count w and error 0; else the item
-- with the smallest count (the smallest item among equal counts, which is
-- ZRANGE's order) is evicted, and the new item enters with the evicted
-- count + w and error = the evicted count. pkg/sketch.SpaceSaving is the
-- same algorithm in Go; a test feeds both the same stream.
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
  local size = redis.call('ZCARD', ss)
  local added = 0
  for _ = 1, n do
    local item, w = ARGV[a], tonumber(ARGV[a + 1])
    a = a + 2
    added = added + w
    -- ZADD XX INCR: increments a monitored item, nil for any other
    if not redis.call('ZADD', ss, 'XX', 'INCR', w, item) then
      if size < m then
        redis.call('ZADD', ss, w, item)
        size = size + 1
      else
        -- ZPOPMIN takes the smallest score, the smallest member among ties
        local low = redis.call('ZPOPMIN', ss)
        local min = tonumber(low[2])
        redis.call('ZREM', sse, low[1])
        redis.call('ZADD', ss, min + w, item)
        redis.call('ZADD', sse, min, item)
        evictions = evictions + 1
      end
    end
  end
  redis.call('INCRBY', total, added)
  redis.call('EXPIREAT', ss, expire_at)
  redis.call('EXPIREAT', sse, expire_at)
  redis.call('EXPIREAT', total, expire_at)
end
return evictions
