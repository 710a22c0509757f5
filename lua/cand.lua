-- cand.lua: the size of an hour's candidate set and its bound, shared by
-- ingest.lua (which trims it as counts rise, and ranks from it when it
-- keeps the ranking current) and refresh.lua (which trims it as a rescan
-- refills it, and ranks from it). It is not a script: package lua puts it in place of
-- each script's "-- #include cand.lua" line, as it does bulk.lua.

-- keep_for is how many of the highest counts cand keeps at least: c, and
-- never fewer than one and a half times k, the k of the cached ranking
-- (ingest.lua reads it from the ranking's meta), so that a refresh finds
-- k candidates above the floor after the minutes leaving the window have
-- lowered some of them, without rescanning the sum (refresh.lua).
local function keep_for(c, k)
  return math.max(c, k + math.floor(k / 2))
end

-- ranks says whether cand's top k is the window's when no channel outside
-- it counts more than bound (refresh.lua, "Ranking").
local function ranks(cand, bound, k)
  return bound == 0 or redis.call('ZCOUNT', cand, '(' .. bound, '+inf') >= k
end

-- trim bounds cand to its keep highest counts (ties at the keep-th count
-- stay) once it holds more than 2 * keep, and returns the floor: the
-- highest count that left, if above the floor it had, which it writes to
-- floor_key (keeping that key's expiry; the callers set it).
local function trim(cand, floor_key, floor, keep)
  local n = redis.call('ZCARD', cand)
  if n <= 2 * keep then
    return floor
  end
  local cth = tonumber(redis.call('ZRANGE', cand, n - keep, n - keep, 'WITHSCORES')[2])
  local below = redis.call('ZRANGE', cand, '(' .. cth, '-inf', 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', 0, 1)
  if #below == 0 then
    return floor -- ties at the keep-th count: keep them all
  end
  redis.call('ZREMRANGEBYSCORE', cand, '-inf', '(' .. cth)
  local left = tonumber(below[2])
  if left > floor then
    redis.call('SET', floor_key, left, 'KEEPTTL')
    return left
  end
  return floor
end
