#!lua
-- ingest.lua: add one flush's pre-aggregated counts to the minute buckets
-- and to each workspace's running window sum.
--
-- The call is a sequence of groups, one per workspace (a workspace's counts
-- may be split over several groups and calls).
-- KEYS, per group: win, through, minutes, bucket_1 .. bucket_b
--   win       <prefix>:{w:<ws>}:win:1h          sorted set, the window's running sum
--   through   <prefix>:{w:<ws>}:win:1h:through  string, the newest minute already
--             subtracted from win (missing: none yet)
--   minutes   <prefix>:{w:<ws>}:win:1h:minutes  sorted set, the minutes added to
--             win and not yet subtracted (member = score = unix minute)
--   bucket_i  <prefix>:{w:<ws>}:m:<minute_i>    sorted set, one minute's counts
-- ARGV, per group: b, then per bucket:
--   minute, expire_at, n, member_1, increment_1, ..., member_n, increment_n
--   expire_at is when the bucket leaves the window plus grace; it depends
--   only on the minute, so a late write never extends a bucket's life.
-- Reply    integer: the number of (member, increment) pairs applied.
--
-- Invariant, kept together with refresh.lua: win is the sum of the buckets
-- of the minutes in `minutes`, which are the minutes after `through` that
-- have counts. A count for a minute at or before `through` (already
-- subtracted, so out of the window) goes to its bucket only.
--
-- Everything happens in one atomic script, so a bucket never has counts
-- without its TTL and win never disagrees with the buckets. The "#!lua"
-- line (Redis 7 script flags, none set) makes Redis refuse the script up
-- front when it is out of memory, instead of failing it halfway.

-- raise_expiry sets key's expiry to at unless it already expires later.
-- (EXPIREAT GT alone skips a key that has no expiry yet; NX covers that.)
local function raise_expiry(key, at)
  redis.call('EXPIREAT', key, at, 'NX')
  redis.call('EXPIREAT', key, at, 'GT')
end

local k, a, applied = 1, 1, 0
while k <= #KEYS do
  local win, minutes = KEYS[k], KEYS[k + 2]
  local through = tonumber(redis.call('GET', KEYS[k + 1]))
  local b = tonumber(ARGV[a])
  a = a + 1
  local latest = 0 -- the latest expiry among the buckets added to win
  for i = 1, b do
    local bucket = KEYS[k + 2 + i]
    local minute, expire_at, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
    a = a + 3
    local in_win = through == nil or tonumber(minute) > through
    for _ = 1, n do
      redis.call('ZINCRBY', bucket, ARGV[a + 1], ARGV[a])
      if in_win then
        redis.call('ZINCRBY', win, ARGV[a + 1], ARGV[a])
      end
      a = a + 2
    end
    redis.call('EXPIREAT', bucket, expire_at)
    if in_win then
      redis.call('ZADD', minutes, minute, minute)
      latest = math.max(latest, tonumber(expire_at))
    end
    applied = applied + n
  end
  if latest > 0 then
    raise_expiry(win, latest)
    raise_expiry(minutes, latest)
  end
  k = k + 3 + b
end
return applied
