#!lua
-- refresh.lua: recompute one workspace's cached top K over its minute buckets
-- and replace the cached result atomically.
--
-- KEYS[1]    scratch sorted set, <prefix>:{w:<ws>}:top:<window>:tmp
-- KEYS[2]    cached result,      <prefix>:{w:<ws>}:top:<window>
-- KEYS[3]    result metadata,    <prefix>:{w:<ws>}:top:<window>:meta
-- KEYS[4..]  the minute buckets that make up the window (missing ones are empty)
-- ARGV[1]    k, the number of entries to keep
-- ARGV[2]    computed_at, unix milliseconds
-- ARGV[3]    window_start, unix milliseconds (start of the oldest minute)
-- ARGV[4]    window_end, unix milliseconds
-- ARGV[5]    ttl of the result and its metadata, seconds
-- Reply      integer: the number of entries in the new cached result.
--
-- Ranking: count descending, ties by channel id in descending byte order,
-- which is exactly the order ZREVRANGE returns, so readers need no re-sort.
-- An empty window deletes the cached set; the metadata stays (with its TTL)
-- so readers can tell "no activity" from "never computed".
--
-- The "#!lua" line (Redis 7 script flags, none set) makes Redis refuse the
-- script up front when it is out of memory, instead of failing it halfway
-- after some writes, and enforces that every key is passed in KEYS.
local k = tonumber(ARGV[1])
local n = redis.call('ZUNIONSTORE', KEYS[1], #KEYS - 3, unpack(KEYS, 4))
if n > k then
  -- ranks are ascending, so this drops everything below the top k
  redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - k - 1)
  n = k
end
if n > 0 then
  redis.call('RENAME', KEYS[1], KEYS[2])
  redis.call('EXPIRE', KEYS[2], ARGV[5])
else
  redis.call('DEL', KEYS[2])
end
redis.call('HSET', KEYS[3], 'computed_at', ARGV[2], 'window_start', ARGV[3],
  'window_end', ARGV[4], 'k', ARGV[1])
redis.call('EXPIRE', KEYS[3], ARGV[5])
return n
