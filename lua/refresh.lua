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
-- ARGV[8]    c, the candidates a rescan keeps (as ingest.lua's ARGV[3])
-- then, per group: b, and the b unix minutes whose buckets the group passes
-- KEYS, per group: top, meta, win, through, minutes, cand, floor, pend,
--   bucket_1 .. bucket_b
--   top      <prefix>:{w:<ws>}:top:<window>       the cached result
--   meta     <prefix>:{w:<ws>}:top:<window>:meta  its metadata
--   win, through, minutes, cand, floor, pend: see ingest.lua
-- Reply      array, per group: an integer, the number of entries in the new
--            cached result, or -1 when the group must wait for held counts
--            (see "Held counts"); or an array of the unix minutes (strings)
--            whose buckets the group needs: the caller calls again with
--            them. A group that waits or asks changed nothing.
--
-- Sliding: every minute of `minutes` older than the window is subtracted
-- from win, once: it leaves `minutes` and `through` moves past it in the
-- same atomic step. A channel whose count drops is written to cand if cand
-- holds it, and leaves win and cand at 0, so ingest.lua's invariant holds:
-- every channel above floor is in cand at its count in win. If such a bucket
-- has expired before it could be subtracted (no refresh for longer than the
-- grace), its counts are gone, so win is rebuilt from the window's buckets
-- instead. Callers pass the bucket of the minute that left last, so that
-- the common case, one minute leaving, needs a single call.
--
-- Held counts: a worker may hold a minute's bucket counts while win
-- already has them (pend; see ingest.lua). Subtracting such a bucket would
-- leave its held counts in win for good, and rebuilding win from the
-- buckets would lose them, so a group whose leaving minutes reach the
-- oldest minute still held (or that would rebuild while anything is held)
-- changes nothing and replies -1; the caller tries again at its next tick.
-- Workers write their holds within seconds, so this happens only when one
-- has been stopped for about the hour a minute takes to leave the window.
--
-- Ranking (exact): the top K of cand is the window's when its K-th count is
-- above floor, or floor is 0: any channel outside cand, or held at a count
-- not above floor, counts at most floor. Counts only fall when minutes
-- leave, so that can stop being true; then cand is rebuilt from win (a scan
-- of win, which a steady workspace seldom needs). Order: count descending,
-- ties by channel id in descending byte order, which is exactly the order
-- ZREVRANGE returns, so readers need no re-sort. An empty window deletes
-- the cached set; the metadata stays (with its TTL) so readers can tell "no
-- activity" from "never computed".
-- #include bulk.lua

local first, k, c = tonumber(ARGV[6]), tonumber(ARGV[1]), tonumber(ARGV[8])

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

-- copy_expiry gives dst src's expiry (src always has one: ingest.lua and
-- rebuild set it; EXPIREAT -1 would delete dst).
local function copy_expiry(dst, src)
  local at = redis.call('EXPIRETIME', src)
  if at > 0 then
    redis.call('EXPIREAT', dst, at)
  end
end

-- rescan rebuilds cand and floor from win: every channel, then those below
-- the keep-th highest count leave, and floor is the highest count that left.
local function rescan(win, cand, floor_key, keep)
  redis.call('DEL', cand, floor_key)
  local all = redis.call('HGETALL', win)
  if #all == 0 then
    return
  end
  local zadd = {}
  for i = 1, #all, 2 do
    zadd[i], zadd[i + 1] = all[i + 1], all[i]
  end
  bulk('ZADD', cand, zadd)
  copy_expiry(cand, win)
  local n = #all / 2
  if n <= keep then
    return
  end
  local cth = redis.call('ZRANGE', cand, n - keep, n - keep, 'WITHSCORES')[2]
  local below = redis.call('ZRANGE', cand, '(' .. cth, '-inf', 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', 0, 1)
  if #below > 0 then
    redis.call('ZREMRANGEBYSCORE', cand, '-inf', '(' .. cth)
    redis.call('SET', floor_key, below[2])
    copy_expiry(floor_key, win)
  end
end

-- subtract takes a leaving bucket's counts out of win and cand.
local function subtract(win, cand, bucket)
  local counts = redis.call('ZRANGE', bucket, 0, -1, 'WITHSCORES')
  for i = 1, #counts, 2 do
    local member = counts[i]
    local left = redis.call('HINCRBY', win, member, -tonumber(counts[i + 1]))
    if left <= 0 then
      redis.call('HDEL', win, member)
      redis.call('ZREM', cand, member)
    else
      redis.call('ZADD', cand, 'XX', left, member)
    end
  end
end

-- held_since returns the oldest minute whose counts a worker may still
-- hold (pend's fields "<source>@<minute>"), or nil.
local function held_since(pend)
  local fields = redis.call('HGETALL', pend) -- the ACLs' commands: no HKEYS
  local oldest
  for i = 1, #fields, 2 do
    local m = tonumber(string.match(fields[i], '@(%d+)$'))
    if m and (oldest == nil or m < oldest) then
      oldest = m
    end
  end
  return oldest
end

-- rebuild makes win the sum of the buckets of inside (their keys in passed).
local function rebuild(win, inside, passed)
  redis.call('DEL', win)
  local sum = {}
  for _, m in ipairs(inside) do
    local counts = redis.call('ZRANGE', passed[m], 0, -1, 'WITHSCORES')
    for i = 1, #counts, 2 do
      sum[counts[i]] = (sum[counts[i]] or 0) + tonumber(counts[i + 1])
    end
  end
  local hset = {}
  for member, n in pairs(sum) do
    hset[#hset + 1] = member
    hset[#hset + 1] = n
  end
  if #hset > 0 then
    bulk('HSET', win, hset)
  end
end

-- refresh does one group; passed maps a minute to its bucket key.
local function refresh(top, meta, win, through, minutes, cand, floor_key, pend, passed)
  local leaving = redis.call('ZRANGE', minutes, '-inf', '(' .. first, 'BYSCORE')
  local stale = false -- cand must be rebuilt from win
  if #leaving > 0 then
    if #missing(leaving, passed) > 0 then
      return leaving
    end
    local held = held_since(pend)
    if held ~= nil and held <= tonumber(leaving[#leaving]) then
      return -1
    end
    -- A sorted set with no members does not exist, so a size of 0 means
    -- the bucket expired.
    local lost = false
    for _, m in ipairs(leaving) do
      if redis.call('EXISTS', passed[m]) == 0 then
        lost = true
      end
    end
    if lost then
      if held ~= nil then
        return -1
      end
      local inside = redis.call('ZRANGE', minutes, first, '+inf', 'BYSCORE')
      if #missing(inside, passed) > 0 then
        for _, m in ipairs(leaving) do
          inside[#inside + 1] = m
        end
        return inside
      end
      rebuild(win, inside, passed)
      copy_expiry(win, minutes)
      stale = true
    else
      for _, m in ipairs(leaving) do
        subtract(win, cand, passed[m])
      end
    end
    redis.call('ZREMRANGEBYSCORE', minutes, '-inf', '(' .. first)
    redis.call('SET', through, first - 1, 'EXAT', ARGV[7])
  end

  local floor = tonumber(redis.call('GET', floor_key)) or 0
  if not stale and floor > 0 and redis.call('ZCOUNT', cand, '(' .. floor, '+inf') < k then
    stale = true
  end
  if stale then
    rescan(win, cand, floor_key, math.max(c, k))
  end
  local n = redis.call('ZRANGESTORE', top, cand, 0, k - 1, 'REV')
  if n > 0 then
    redis.call('EXPIRE', top, ARGV[5])
  end
  redis.call('HSET', meta, 'computed_at', ARGV[2], 'window_start', ARGV[3],
    'window_end', ARGV[4], 'k', ARGV[1])
  redis.call('EXPIRE', meta, ARGV[5])
  return n
end

local replies = {}
local ki, ai = 1, 9
while ki <= #KEYS do
  local b = tonumber(ARGV[ai])
  local passed = {}
  for i = 1, b do
    passed[ARGV[ai + i]] = KEYS[ki + 7 + i]
  end
  replies[#replies + 1] = refresh(KEYS[ki], KEYS[ki + 1], KEYS[ki + 2], KEYS[ki + 3], KEYS[ki + 4],
    KEYS[ki + 5], KEYS[ki + 6], KEYS[ki + 7], passed)
  ki, ai = ki + 8 + b, ai + 1 + b
end
return replies
