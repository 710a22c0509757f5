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
-- ARGV[8]    c: a rescan keeps cand.lua's keep_for(c, k) (as ingest.lua, ARGV[3])
-- ARGV[9]    the most bucket members a group subtracts, or sum channels it
--            rescans, in one call (see "A slide in parts", "A rescan in parts")
-- ARGV[10]   "1" to cache rankings; "0" in a call that only goes on with
--            slides and rescans: a group whose slide or rescan is not over
--            then leaves its ranking as it is
-- then, per group: b, and the b unix minutes whose buckets the group passes
-- KEYS, per group: top, meta, win, through, minutes, cand, floor, pend,
--   slide, out, rescan, bucket_1 .. bucket_b
--   top      <prefix>:{w:<ws>}:top:<window>       the cached result
--   meta     <prefix>:{w:<ws>}:top:<window>:meta  its metadata
--   win, through, minutes, cand, floor, pend: see ingest.lua
--   slide    <prefix>:{w:<ws>}:win:<window>:slide hash: m, the minute sliding
--            out in parts, and cursor, where its bucket's scan stands
--   out      <prefix>:{w:<ws>}:win:<window>:slide:out  hash: per
--            member, the part of its count in m's bucket that win does
--            not hold (subtracted, or come after the slide began)
--   rescan   <prefix>:{w:<ws>}:win:<window>:rescan  hash: while cand is
--            rebuilt from win in parts, cursor (where the scan of win
--            stands) and floor (the bound it began with)
-- Reply      array, per group: an integer, the number of entries in the new
--            cached result, or -1 when the group must wait for held counts
--            (see "Held counts"); or an array of the unix minutes (strings)
--            whose buckets the group needs: the caller calls again with
--            them (a group that waits or asks changed nothing); or
--            {'slide', m, n}: part of minute m's bucket was subtracted and
--            n entries cached, and the caller calls again with m's bucket
--            to go on; or {'rescan', n}: part of win was rescanned, or a
--            rescan ended with fewer than k candidates above the floor
--            (the next call begins another), and n entries cached (-1:
--            none, the ranking waits), and the caller calls again to go on.
--
-- Sliding: every minute of `minutes` older than the window is subtracted
-- from win, once: it leaves `minutes` and `through` moves past it in the
-- same atomic step. A channel whose count drops is written to cand if cand
-- holds it, and leaves win and cand at 0, so ingest.lua's invariant holds:
-- every channel above floor (during a rescan, above the rescan's bound) is
-- in cand at its count in win. If such a bucket
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
-- A slide in parts: a bucket of more than ARGV[9] members (a workspace
-- of a million channels has minutes of half a million) would take seconds
-- to subtract in one call, and Redis would serve no one else meanwhile. So
-- such a minute m leaves in parts, about ARGV[9] members a call. When it
-- starts, m leaves `minutes` and `through` moves to it, so from then on
-- ingest.lua adds no count of m to win: a bucket group's count of m goes to
-- its bucket and to out. So for every member, win holds its count in m's
-- bucket less its count in out. Each call takes the next members of a ZSCAN
-- of the bucket (slide's cursor), subtracts that difference from win and
-- raises out to the bucket's count, so a member ZSCAN returns twice is
-- subtracted once. ZSCAN returns every member present for the whole scan,
-- which is every member win holds counts of m for, so the slide is over
-- when the scan is. The first call checks held counts as a whole
-- subtraction does; once it has begun, no count of m can be held for win.
-- Meanwhile the ranking is computed from cand less what win still holds of
-- m (sliding_top). That does not change as the slide goes on, so a call
-- that only goes on with it (ARGV[10] "0") leaves the ranking as it is; a
-- ranking waits while another minute is to leave behind m.
--
-- Ranking (exact): the top K of cand is the window's when its K-th count is
-- above floor, or floor is 0: any channel outside cand, or held at a count
-- not above floor, counts at most floor. Counts only fall when minutes
-- leave, so that can stop being true; then cand is rebuilt from win (a
-- rescan, which a steady workspace seldom needs). Order: count descending,
-- ties by channel id in descending byte order, which is exactly the order
-- ZREVRANGE returns, so readers need no re-sort. An empty window deletes
-- the cached set; the metadata stays (with its TTL) so readers can tell "no
-- activity" from "never computed".
--
-- A rescan in parts: reading a sum of a million channels into cand took
-- 4 to 5 s in one call (BenchmarkRescanRedis), and one of 10,000 channels
-- 31 ms. So cand is refilled
-- in place, about ARGV[9] of win's channels a call (an HSCAN from rescan's
-- cursor), each written to cand at its count when above floor, and cand
-- trimmed as ingest.lua trims it. When the rescan begins, its bound F (the
-- floor) goes to rescan and floor starts again from 0, so ingest.lua
-- writes every count it raises to cand, and floor rises only with the
-- trims. Meanwhile every channel counting more than max(F, floor) is in
-- cand at its count: those above F were, a count ingest.lua raises above
-- floor is written, a scanned one is written at its count, a slide writes
-- the counts it lowers, and a trim raises floor above what it drops. So
-- the ranking and pkg/hoursum take max(F, floor) as the bound while the
-- rescan goes on (a ranking whose K-th count is not above it waits). Once
-- the scan is over every channel has been written or was raised since
-- (HSCAN returns every field present for the whole scan), so floor alone
-- is the bound again. A sum rebuilt from the buckets has no candidates to
-- go by, so it is rescanned whole in the call that rebuilt it.
-- #include bulk.lua
-- #include cand.lua

local first, k, c, budget, rank = tonumber(ARGV[6]), tonumber(ARGV[1]), tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10] == '1'

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

-- start_rescan begins a rescan of win into cand whose readers go by bound
-- until it ends (see "A rescan in parts"). It records the k it is for, so
-- that ingest.lua keeps as many candidates as this ranking needs
-- meanwhile, not as the last one written (its meta's k) did.
local function start_rescan(win, floor_key, rescan, bound)
  redis.call('DEL', floor_key)
  redis.call('HSET', rescan, 'cursor', 0, 'floor', bound, 'k', k)
end

-- rescan_part goes on with the rescan of win into cand: the channels the
-- next HSCAN of about `budget` returns, those above floor written to cand
-- at their counts, and cand trimmed to its keep highest. It says whether
-- the rescan is over.
local function rescan_part(win, cand, floor_key, rescan, keep)
  local floor = tonumber(redis.call('GET', floor_key)) or 0
  local scan = redis.call('HSCAN', win, redis.call('HGET', rescan, 'cursor'), 'COUNT', budget)
  local items, zadd = scan[2], {}
  for i = 1, #items, 2 do
    local n = tonumber(items[i + 1])
    if n > floor then
      zadd[#zadd + 1], zadd[#zadd + 2] = n, items[i]
    end
  end
  if #zadd > 0 then
    bulk('ZADD', cand, zadd)
    copy_expiry(cand, win)
    if trim(cand, floor_key, floor, keep) > floor then
      copy_expiry(floor_key, win)
    end
  end
  if scan[1] == '0' then
    redis.call('UNLINK', rescan)
    return true
  end
  redis.call('HSET', rescan, 'cursor', scan[1])
  -- It lives as long as win, which ingest.lua's counts keep extending: a
  -- rescan key gone before its end would drop its bound unseen.
  copy_expiry(rescan, win)
  return false
end

-- going is the reply of a group whose slide (part) or rescan goes on, n
-- entries cached (-1: none).
local function going(part, n)
  if part then
    return { 'slide', part.m, n }
  end
  return { 'rescan', n }
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

-- slide_part subtracts the next part of the bucket of the minute sliding
-- out in parts (see "A slide in parts"): each member a ZSCAN of about
-- `budget` returns, at its count less its count in out. It says whether
-- the slide is over.
local function slide_part(win, cand, slide, out, bucket)
  local scan = redis.call('ZSCAN', bucket, redis.call('HGET', slide, 'cursor'), 'COUNT', budget)
  local items, members = scan[2], {}
  for i = 1, #items, 2 do
    members[#members + 1] = items[i]
  end
  if #members > 0 then
    local gone, now_out = bulk('HMGET', out, members), {}
    for j, member in ipairs(members) do
      local count = tonumber(items[2 * j])
      local n = count - (tonumber(gone[j]) or 0)
      if n > 0 then
        local left = redis.call('HINCRBY', win, member, -n)
        if left <= 0 then
          redis.call('HDEL', win, member)
          redis.call('ZREM', cand, member)
        else
          redis.call('ZADD', cand, 'XX', left, member)
        end
        now_out[#now_out + 1], now_out[#now_out + 2] = member, count
      end
    end
    if #now_out > 0 then
      bulk('HSET', out, now_out)
      copy_expiry(out, bucket)
    end
  end
  if scan[1] == '0' then
    redis.call('UNLINK', slide, out)
    return true
  end
  redis.call('HSET', slide, 'cursor', scan[1])
  return false
end

-- sliding_top caches the top k of win less what win still holds of the
-- sliding minute (each member's count in `bucket` less its count in out):
-- cand's members are taken in descending order of count until the next
-- cannot reach the k-th count found. It returns the entries cached, or
-- nil, caching nothing, when that k-th count is not above floor (a member
-- outside cand might reach it).
local function sliding_top(top, cand, floor, out, bucket)
  local found, counts, from = {}, {}, 0
  while true do
    local page = redis.call('ZRANGE', cand, from, from + 2 * k - 1, 'REV', 'WITHSCORES')
    if #page == 0 then
      break
    end
    local members = {}
    for i = 1, #page, 2 do
      members[#members + 1] = page[i]
    end
    local in_m, gone = bulk('ZMSCORE', bucket, members), bulk('HMGET', out, members)
    for j, member in ipairs(members) do
      local n = tonumber(page[2 * j]) - ((tonumber(in_m[j]) or 0) - (tonumber(gone[j]) or 0))
      if n > 0 then
        found[#found + 1], found[#found + 2] = n, member
        counts[#counts + 1] = n
      end
    end
    from = from + #members
    table.sort(counts, function(x, y) return x > y end)
    if #counts >= k and tonumber(page[#page]) < counts[k] then
      break
    end
  end
  if floor > 0 and (#counts < k or counts[k] <= floor) then
    return nil
  end
  redis.call('DEL', top)
  if #found == 0 then
    return 0
  end
  bulk('ZADD', top, found)
  -- Ties at the k-th count are settled by Redis's own order, as ZRANGESTORE's.
  redis.call('ZREMRANGEBYRANK', top, 0, -k - 1)
  return redis.call('ZCARD', top)
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
local function refresh(top, meta, win, through, minutes, cand, floor_key, pend, slide, out, rescan, passed)
  local stale = false -- cand must be rebuilt from win
  local part -- the minute sliding out in parts, while it is not done
  local slide_lost = false -- its bucket expired mid-slide (no refresh for about an hour)
  local sliding = redis.call('HGET', slide, 'm')
  if sliding then
    if not passed[sliding] then
      return { sliding }
    end
    if redis.call('EXISTS', passed[sliding]) == 0 then
      slide_lost = true
    elseif not slide_part(win, cand, slide, out, passed[sliding]) then
      part = { m = sliding, bucket = passed[sliding] }
    end
  end
  local leaving = redis.call('ZRANGE', minutes, '-inf', '(' .. first, 'BYSCORE')
  if part and #leaving > 0 then
    return { 'slide', part.m, -1 } -- the ranking waits for the minutes behind it
  end
  if #leaving > 0 or slide_lost then
    if #missing(leaving, passed) > 0 then
      return leaving
    end
    local held = held_since(pend)
    if #leaving > 0 and held ~= nil and held <= tonumber(leaving[#leaving]) then
      return -1
    end
    -- A sorted set with no members does not exist, so a size of 0 means
    -- the bucket expired.
    local lost = slide_lost
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
        if slide_lost then -- asked for again above unless passed too
          inside[#inside + 1] = sliding
        end
        return inside
      end
      redis.call('UNLINK', slide, out) -- a slide under way is moot
      rebuild(win, inside, passed)
      copy_expiry(win, minutes)
      stale = true
    else
      for i, m in ipairs(leaving) do
        local bucket = passed[m]
        if redis.call('ZCARD', bucket) > budget then
          -- It slides out in parts from here, out of the window at once
          -- for ingest.lua.
          redis.call('ZREMRANGEBYSCORE', minutes, '-inf', m)
          redis.call('SET', through, m, 'EXAT', ARGV[7])
          redis.call('HSET', slide, 'm', m, 'cursor', 0)
          -- As long as win, not the bucket: should the bucket expire
          -- before the slide ends (no refresh for longer than the grace),
          -- this key is what tells the next refresh to rebuild win.
          copy_expiry(slide, win)
          if not slide_part(win, cand, slide, out, bucket) then
            part = { m = m, bucket = bucket }
            if i < #leaving then
              return { 'slide', m, -1 }
            end
            break
          end
        else
          subtract(win, cand, bucket)
        end
      end
    end
    redis.call('ZREMRANGEBYSCORE', minutes, '-inf', '(' .. first)
    redis.call('SET', through, first - 1, 'EXAT', ARGV[7])
  end
  -- The rescan, begun when fewer than k candidates are above floor, goes
  -- on a part a call; the bound readers go by is the higher of floor and
  -- the one it began with (see "A rescan in parts").
  local keep = keep_for(c, k)
  local scanning = tonumber(redis.call('HGET', rescan, 'floor'))
  if stale then
    redis.call('DEL', cand)
    start_rescan(win, floor_key, rescan, 0)
    while not rescan_part(win, cand, floor_key, rescan, keep) do
    end
    scanning = nil
  else
    if not scanning then
      local floor = tonumber(redis.call('GET', floor_key)) or 0
      if not ranks(cand, floor, k) then
        start_rescan(win, floor_key, rescan, floor)
        scanning = floor
      end
    end
    if scanning and rescan_part(win, cand, floor_key, rescan, keep) then
      scanning = nil
    end
  end
  local on = part or scanning -- a slide or a rescan goes on after this call
  if on and not rank then
    return going(part, -1) -- the ranking of the call before stands
  end

  local bound = math.max(tonumber(redis.call('GET', floor_key)) or 0, scanning or 0)
  local n
  if part then
    n = sliding_top(top, cand, bound, out, part.bucket)
  elseif ranks(cand, bound, k) then
    n = redis.call('ZRANGESTORE', top, cand, 0, k - 1, 'REV')
  end
  if n == nil then
    -- The ranking waits for the slide or the rescan; or, when a slide
    -- during the rescan lowered counts again, for the next rescan, which
    -- begins now: its key tells ingest.lua that the cached ranking is not
    -- current (ingest.lua, "The ranking, kept current").
    if not on then
      start_rescan(win, floor_key, rescan, bound)
    end
    return going(part, -1)
  end
  if n > 0 then
    redis.call('EXPIRE', top, ARGV[5])
  end
  redis.call('HSET', meta, 'computed_at', ARGV[2], 'window_start', ARGV[3],
    'window_end', ARGV[4], 'k', ARGV[1])
  redis.call('EXPIRE', meta, ARGV[5])
  if on then
    return going(part, n)
  end
  return n
end

local replies = {}
local ki, ai = 1, 11
while ki <= #KEYS do
  local b = tonumber(ARGV[ai])
  local passed = {}
  for i = 1, b do
    passed[ARGV[ai + i]] = KEYS[ki + 10 + i]
  end
  replies[#replies + 1] = refresh(KEYS[ki], KEYS[ki + 1], KEYS[ki + 2], KEYS[ki + 3], KEYS[ki + 4],
    KEYS[ki + 5], KEYS[ki + 6], KEYS[ki + 7], KEYS[ki + 8], KEYS[ki + 9], KEYS[ki + 10], passed)
  ki, ai = ki + 11 + b, ai + 1 + b
end
return replies
