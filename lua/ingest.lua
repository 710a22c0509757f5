#!lua
-- ingest.lua: add one flush's pre-aggregated counts to minute buckets.
--
-- KEYS[i]  a minute bucket, <prefix>:{w:<ws>}:m:<unix_minute> (sorted set).
--          In Redis Cluster the caller passes only keys of one workspace
--          (one hash slot) per call; on a single Redis it may mix workspaces.
-- ARGV     for each KEYS[i], in order:
--            expire_at   unix seconds at which the bucket expires
--                        (when its minute leaves the window, plus grace), so a late
--                        write never extends a bucket's life
--            n           number of (member, increment) pairs that follow
--            member_1, increment_1, ..., member_n, increment_n
-- Reply    integer: the number of ZINCRBY calls applied.
--
-- The script runs atomically: a bucket never has counts without its TTL.
--
-- The "#!lua" line (Redis 7 script flags, none set) makes Redis refuse the
-- script up front when it is out of memory, instead of failing it halfway
-- after some writes, and enforces that every key is passed in KEYS.
local a = 1
local applied = 0
for i = 1, #KEYS do
  local key = KEYS[i]
  local expire_at = ARGV[a]
  local n = tonumber(ARGV[a + 1])
  a = a + 2
  for _ = 1, n do
    redis.call('ZINCRBY', key, ARGV[a + 1], ARGV[a])
    a = a + 2
  end
  redis.call('EXPIREAT', key, expire_at)
  applied = applied + n
end
return applied
