#!lua
-- refresh.lua: slide workspaces' running window sums to the current window,
-- then cache each one's top K atomically.
--
-- The call is a sequence of groups, one per workspace. On a single Redis a
-- call may carry many workspaces; in Redis Cluster it carries one.
-- ARGV[1]    k, the number of entries to keep
-- ARGV[2]    computed_at, unix milliseconds
-- ARGV[3]    window_start, unix milliseconds (start of the oldest minute)
-- ARGV[4]    window_end, unix milliseconds
-- ARGV[5]    ttl of the result and its metadata, seconds
-- ARGV[6]    the oldest unix minute of the window
-- ARGV[7]    expiry (unix seconds) for `through` once it is ARGV[6]-1: the
--            expiry of that minute's bucket, so `through` outlives every
--            bucket it speaks for
-- then, per group: b, and the b unix minutes whose buckets the group passes
-- KEYS, per group: top, meta, win, through, minutes, bucket_1 .. bucket_b
--   top      <prefix>:{w:<ws>}:top:<window>       the cached result
--   meta     <prefix>:{w:<ws>}:top:<window>:meta  its metadata
--   win, through, minutes: see ingest.lua
-- Reply      array, per group: an integer, the number of entries in the new
--            cached result; or an array of the unix minutes (strings) whose
--            buckets the group needs: the caller calls again with them. Such
--            a group changed nothing.
--
-- Sliding: every minute of `minutes` older than the window is subtracted
-- from win, once: it leaves `minutes` and `through` moves past it in the
-- same atomic step. If such a bucket has expired before it could be
-- subtracted (no refresh for longer than the grace), its counts are gone,
-- so win is rebuilt as the union of the window's buckets instead. Callers
-- pass the bucket of the minute that left last, so that the common case,
-- one minute leaving, needs a single call.
--
-- Ranking: count descending, ties by channel id in descending byte order,
-- which is exactly the order ZREVRANGE returns, so readers need no re-sort.
-- An empty window deletes the cached set; the metadata stays (with its TTL)
-- so readers can tell "no activity" from "never computed".
local first = tonumber(ARGV[6])

-- missing returns the minutes of list whose buckets are not in passed.
local function missing(list, passed)
  local out = {}
  for _, m in ipairs(list) do
    if not passed[m] then
      out[#out + 1] = m
    end
  end
  return out
end

-- refresh does one group; passed maps a minute to its bucket key.
local function refresh(top, meta, win, through, minutes, passed)
  local leaving = redis.call('ZRANGE', minutes, '-inf', '(' .. first, 'BYSCORE')
  if #leaving > 0 then
    if #missing(leaving, passed) > 0 then
      return leaving
    end
    -- A sorted set with no members does not exist, so a size of 0 means
    -- the bucket expired.
    local lost, sizes = false, {}
    for _, m in ipairs(leaving) do
      sizes[m] = redis.call('ZCARD', passed[m])
      if sizes[m] == 0 then
        lost = true
      end
    end
    if lost then
      local inside = redis.call('ZRANGE', minutes, first, '+inf', 'BYSCORE')
      if #missing(inside, passed) > 0 then
        for _, m in ipairs(leaving) do
          inside[#inside + 1] = m
        end
        return inside
      end
      redis.call('DEL', win)
      if #inside > 0 then
        local buckets = {}
        for i, m in ipairs(inside) do
          buckets[i] = passed[m]
        end
        redis.call('ZUNIONSTORE', win, #buckets, unpack(buckets))
        redis.call('EXPIREAT', win, redis.call('EXPIRETIME', minutes))
      end
    else
      for _, m in ipairs(leaving) do
        local bucket = passed[m]
        if sizes[m] * 4 >= redis.call('ZCARD', win) then
          -- A bucket about as large as the sum: one pass in C over both.
          -- (ZUNIONSTORE replaces win, so its expiry is set again.)
          redis.call('ZUNIONSTORE', win, 2, win, bucket, 'WEIGHTS', 1, -1)
          redis.call('EXPIREAT', win, redis.call('EXPIRETIME', minutes))
          redis.call('ZREMRANGEBYSCORE', win, '-inf', 0)
        else
          -- A small bucket in a large sum: touch only the bucket's members.
          local counts = redis.call('ZRANGE', bucket, 0, -1, 'WITHSCORES')
          for i = 1, #counts, 2 do
            local left = tonumber(redis.call('ZINCRBY', win, '-' .. counts[i + 1], counts[i]))
            if left <= 0 then
              redis.call('ZREM', win, counts[i])
            end
          end
        end
      end
    end
    redis.call('ZREMRANGEBYSCORE', minutes, '-inf', '(' .. first)
    redis.call('SET', through, first - 1, 'EXAT', ARGV[7])
  end

  local n = redis.call('ZRANGESTORE', top, win, 0, tonumber(ARGV[1]) - 1, 'REV')
  if n > 0 then
    redis.call('EXPIRE', top, ARGV[5])
  end
  redis.call('HSET', meta, 'computed_at', ARGV[2], 'window_start', ARGV[3],
    'window_end', ARGV[4], 'k', ARGV[1])
  redis.call('EXPIRE', meta, ARGV[5])
  return n
end

local replies = {}
local ki, ai = 1, 8
while ki <= #KEYS do
  local b = tonumber(ARGV[ai])
  local passed = {}
  for i = 1, b do
    passed[ARGV[ai + i]] = KEYS[ki + 4 + i]
  end
  replies[#replies + 1] = refresh(KEYS[ki], KEYS[ki + 1], KEYS[ki + 2], KEYS[ki + 3], KEYS[ki + 4], passed)
  ki, ai = ki + 5 + b, ai + 1 + b
end
return replies
