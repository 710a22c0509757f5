#!lua
-- fresh.lua: cache workspaces' rankings over the windows beyond the hour
-- (24h, 7d, 30d, all time): the sum of the hours before the current one
-- (windows.lua, at each window's cadence) plus the current hour, read at
-- every call, so a long window is as fresh as the hour's ranking.
--
-- The call is a sequence of groups, one per workspace. On a single Redis a
-- call may carry many workspaces; in Redis Cluster it carries one.
-- KEYS, per group: roll, fold (see rollup.lua), top:1h (the cached hour
--   ranking, refresh.lua); the other keys are named from the workspace's
--   base (see pkg/keys): the current hour's bucket h:<hour> and minute buckets
--   m:<minute>, the sums base:<window>, base:<window>:meta, base:all:err
--   (windows.lua), and the results top:<window>, top:<window>:meta,
--   top:<window>:err.
-- ARGV[1]  computed_at and window_end, unix milliseconds
-- ARGV[2]  the current unix minute
-- ARGV[3]  k, the number of entries to cache
-- ARGV[4]  c: the walk over each sum takes at most 5c of its members
-- ARGV[5]  ttl of the cached results of finite windows, seconds
-- ARGV[6]  w, the number of windows
-- ARGV     then per window, shortest first: name, hours (0: all time); then
--          per group: base, "<prefix>:{w:<ws>}:", the workspace's key prefix
-- Reply    array, per group: per window, the entries cached, or -1 when the
--          window's sum is not for the current hour yet (left as it was).
--
-- Exactness. A long window W at hour H is its sum S (the hours before H)
-- plus the current hour's counts C (h:<H> and the minute buckets of H not
-- folded yet, less folding while one is folded in chunks). The candidates
-- are each current-hour bucket's top k, the hour ranking's entries, the
-- previous (shorter) window's entries and the sum's members walked in rank
-- order. A member outside the buckets' tops has C(x) at most the sum of
-- their k-th counts (hour_rest: 0 when every bucket was read whole); one
-- not walked has S(x) at most the first unwalked count plus slack (or next
-- plus slack, when the sum was cut without it). The walk stops once that
-- total is below the (k+1)-th lowest count of the candidates, so no member
-- left out can be an entry or the next count; or, with no slack and the
-- current hour read whole (hour_rest 0, nothing folded in chunks), after k
-- + 1 members, since each member not walked then counts exactly its sum
-- count and ranks below all of them; or after 5c members, where the error
-- bound grows to cover what it left. A sum's top is fixed within the hour
-- while C only grows, so in a light workspace (long runs of equal counts,
-- the current hour read whole) a pass weighs O(k) members, not the ties.
-- Windows nest (1h in 24h in 7d in 30d in all time), so a member's lowest
-- count in a shorter window is one in the longer too: a longer window never
-- shows less than a shorter one. Each entry's error bound covers the sum's
-- slack (cut buckets, the all-time summary's error and floor); an entry is
-- marked "!" when its lowest possible count reaches the highest of every
-- member left out.
--
-- Ranking: count descending, ties by member in descending byte order, as
-- refresh.lua's.
-- #include bulk.lua

local now_ms, minute, k, c, ttl, nwin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local hour = math.floor(minute / 60)

-- pairs_of turns a WITHSCORES reply into a list of {member, count}.
local function pairs_of(reply)
  local out = {}
  for j = 1, #reply, 2 do
    out[#out + 1] = { reply[j], tonumber(reply[j + 1]) }
  end
  return out
end

-- scores returns key's score of each member (nil where absent).
local function scores(key, members)
  local out = {}
  for j, v in ipairs(bulk('ZMSCORE', key, members)) do
    out[j] = tonumber(v)
  end
  return out
end

-- top_of returns key's top n members as {member, count} and the highest
-- count of every member it leaves out (0: none left out).
local function top_of(key, n)
  local top = pairs_of(redis.call('ZRANGE', key, 0, n - 1, 'REV', 'WITHSCORES'))
  if #top < n then
    return top, 0
  end
  return top, top[#top][2]
end

-- A highest is a min-heap of the n highest numbers pushed to it, so that
-- its root is their n-th highest: kept as numbers arrive, rather than
-- sorting them all again each time it is needed.
local function highest(n)
  return { n = n }
end

-- push adds x to the heap h.
local function push(h, x)
  local size = #h
  if size < h.n then
    size = size + 1
    h[size] = x
    local i = size
    while i > 1 do
      local p = math.floor(i / 2)
      if h[p] <= h[i] then
        break
      end
      h[p], h[i] = h[i], h[p]
      i = p
    end
  elseif x > h[1] then
    h[1] = x
    local i = 1
    while true do
      local l, m = 2 * i, i
      if l <= size and h[l] < h[m] then
        m = l
      end
      if l + 1 <= size and h[l + 1] < h[m] then
        m = l + 1
      end
      if m == i then
        break
      end
      h[m], h[i] = h[i], h[m]
      i = m
    end
  end
end

-- kth returns the n-th highest number pushed to the heap h of the n
-- highest, or nil when fewer than n were.
local function kth(h)
  if #h < h.n then
    return nil
  end
  return h[1]
end

-- top_k returns the k highest of the scored candidates in ranking order,
-- as {member, e}; the highest possible count of every member left out (at
-- least rest, that of every member not a candidate); and whether a
-- candidate left out could tie the last entry's lowest count with a
-- greater id, and so rank above it. cand: member -> {count, lo, hi}.
-- A window weighs hundreds of candidates, so nothing is sorted with a Lua
-- comparator: the candidates are grouped by count, the counts sorted, and
-- each group needed sorted by member (both compared in C).
local function top_k(cand, rest)
  local counts, by = {}, {}
  for member, e in pairs(cand) do
    local group = by[e.count]
    if group then
      group[#group + 1] = member
    else
      by[e.count] = { member }
      counts[#counts + 1] = e.count
    end
  end
  table.sort(counts)
  local list, more = {}, false
  for i = #counts, 1, -1 do
    local group = by[counts[i]]
    table.sort(group)
    for j = #group, 1, -1 do
      if #list == k then
        more = true
        break
      end
      list[#list + 1] = { group[j], cand[group[j]] }
    end
    if more then
      break
    end
  end
  local out_hi, beat = rest, false
  if more then
    local ranked = {}
    for _, e in ipairs(list) do
      ranked[e[1]] = true
    end
    local last, last_lo = list[k][1], list[k][2].lo
    for member, e in pairs(cand) do
      if not ranked[member] then
        out_hi = math.max(out_hi, e.hi)
        beat = beat or (e.hi == last_lo and member > last)
      end
    end
  end
  return list, out_hi, beat
end

-- cache writes one window's top k of the scored candidates and returns the
-- number of entries written and the entries, as {member, lo}. cand: member
-- -> {count, lo, hi}; rest is the highest possible count of every member
-- not a candidate; ranked, that every such member ranks below the last
-- entry whatever its id.
local function cache(base, name, cand, rest, ranked, first_ms)
  local list, out_hi, beat = top_k(cand, rest)
  local top, meta, errs = base .. 'top:' .. name, base .. 'top:' .. name .. ':meta', base .. 'top:' .. name .. ':err'
  redis.call('DEL', top, errs)
  local zadd, fields, bound, kept = {}, {}, 0, {}
  for j = 1, math.min(k, #list) do
    local member, e = list[j][1], list[j][2]
    kept[j] = { member, e.lo }
    local err = math.max(e.count - e.lo, e.hi - e.count)
    local v = tostring(err)
    if e.lo >= out_hi then
      v = v .. '!'
    end
    zadd[#zadd + 1] = e.count
    zadd[#zadd + 1] = member
    fields[#fields + 1] = member
    fields[#fields + 1] = v
    bound = math.max(bound, err)
  end
  local expire = function(key)
    if name == 'all' then
      redis.call('PERSIST', key)
    else
      redis.call('EXPIRE', key, ttl)
    end
  end
  if #zadd > 0 then
    bulk('ZADD', top, zadd)
    bulk('HSET', errs, fields)
    expire(top)
    expire(errs)
  end
  -- A member left out may count up to out_hi: the ranking is exact only
  -- when none could pass the last entry, or tie it with a greater id (a
  -- candidate's id is known; one that is not a candidate could have any,
  -- unless ranked); otherwise the bound grows to cover how far one might
  -- lie above the last count. next is out_hi: the most the first member
  -- left out can count (its count, when none left out is uncertain).
  local last_lo, last_count = 0, 0
  if #list == k then
    last_lo, last_count = list[k][2].lo, list[k][2].count
  end
  if out_hi > last_lo or beat or (rest > 0 and rest >= last_lo and not ranked) then
    bound = math.max(bound, out_hi - last_count, 1)
  end
  redis.call('HSET', meta, 'computed_at', now_ms, 'window_start', first_ms, 'window_end', now_ms,
    'k', k, 'error_bound', bound, 'next', out_hi)
  expire(meta)
  return #zadd / 2, kept
end

local replies = {}
for i = 1, #KEYS, 3 do
  local roll, fold, top1h = KEYS[i], KEYS[i + 1], KEYS[i + 2]
  local base = ARGV[7 + 2 * nwin + (i - 1) / 3]
  -- The current hour: its folded minutes and those not folded yet.
  local heads = { base .. 'h:' .. hour }
  local older = false -- minutes of earlier hours not folded yet
  for _, m in ipairs(redis.call('ZRANGE', fold, 0, -1)) do
    if tonumber(m) >= hour * 60 then
      heads[#heads + 1] = base .. 'm:' .. m
    else
      older = true
    end
  end
  local marks = redis.call('HMGET', roll, 'f', 'fm')
  local first_hour, fm = tonumber(marks[1]), tonumber(marks[2])
  -- A minute of this hour folded in chunks is in its bucket and partly in
  -- h:<hour> too: that part, folding (rollup.lua), is subtracted.
  local minus
  if fm and math.floor(fm / 60) == hour then
    minus = base .. 'folding'
  end
  -- Candidates of the current hour: each head bucket's top k; a member
  -- outside all of them has at most the sum of their rests (subtracting
  -- only lowers a count).
  local hour_cands, hour_rest, tops = {}, 0, {}
  for _, key in ipairs(heads) do
    local top, rest = top_of(key, k)
    for _, e in ipairs(top) do
      hour_cands[#hour_cands + 1] = e[1]
    end
    tops[#tops + 1] = top
    hour_rest = hour_rest + rest
  end
  local head = {} -- member -> its count in the current hour, once read
  -- With no rest, every head was read whole: a member's count is the sum
  -- of its counts in the replies, and one in none of them has none.
  local whole = hour_rest == 0 and minus == nil
  if whole then
    for _, top in ipairs(tops) do
      for _, e in ipairs(top) do
        head[e[1]] = (head[e[1]] or 0) + e[2]
      end
    end
  end
  local function read_head(members)
    if whole then
      for _, m in ipairs(members) do
        head[m] = head[m] or 0
      end
      return
    end
    local todo = {}
    for _, m in ipairs(members) do
      if head[m] == nil then
        todo[#todo + 1] = m
        head[m] = 0
      end
    end
    if #todo == 0 then
      return
    end
    for _, key in ipairs(heads) do
      local got = scores(key, todo)
      for j, m in ipairs(todo) do
        head[m] = head[m] + (got[j] or 0)
      end
    end
    if minus then
      local got = scores(minus, todo)
      for j, m in ipairs(todo) do
        head[m] = head[m] - (got[j] or 0)
      end
    end
  end
  -- lower: member -> its lowest possible count in the previous (shorter)
  -- window, for the entries it shows; the hour ranking's counts are exact
  -- counts of a window inside every long one. Each window weighs those
  -- entries and the current hour's candidates, besides its sum's.
  local lower, shorter = {}, {}
  for _, e in ipairs(pairs_of(redis.call('ZRANGE', top1h, 0, -1, 'REV', 'WITHSCORES'))) do
    lower[e[1]] = e[2]
    shorter[#shorter + 1] = e[1]
  end
  local counts = {}
  for j = 7, 6 + 2 * nwin, 2 do
    local name, hours = ARGV[j], tonumber(ARGV[j + 1])
    local sum, meta = base .. 'base:' .. name, base .. 'base:' .. name .. ':meta'
    local mk = redis.call('HMGET', meta, 'hour', 'slack', 'next', 'window_start')
    local sum_hour, slack, sum_next, first_ms = tonumber(mk[1]), tonumber(mk[2]) or 0, tonumber(mk[3]) or 0, mk[4]
    -- With no sum yet, a workspace whose every bucket is in the current
    -- hour has nothing before it; otherwise wait for windows.lua.
    local empty = sum_hour == nil and not older and (first_hour == nil or first_hour >= hour)
    if sum_hour ~= hour and not empty then
      counts[#counts + 1] = -1
    else
      if empty then
        slack, sum_next = 0, 0
        first_ms = (hours == 0) and 0 or (hour - hours) * 3600000
      end
      -- The candidates: the shorter window's entries, the current hour's
      -- candidates, then the sum's members in rank order (walk below).
      -- cand: member -> {count, lo, hi}; los: the k + 1 highest of their
      -- lowest counts; sumof:
      -- member -> its count in the sum (nil: not in it).
      local cand, los, sumof = {}, highest(k + 1), {}
      local function add(members)
        read_head(members)
        local errs = {}
        if hours == 0 and not empty then
          -- Only the candidates' errors: the hash holds one per member of
          -- the all-time sum, up to --rollup-keep of them.
          local raw = bulk('HMGET', base .. 'base:all:err', members)
          for j2, v in ipairs(members) do
            if raw[j2] then
              local b, a = string.match(raw[j2], '^(%d+),(%d+)$')
              errs[v] = { tonumber(b), tonumber(a) }
            end
          end
        end
        for _, m in ipairs(members) do
          local s, lo, hi = sumof[m], 0, 0
          if s then
            -- Spans: the count is at most slack short (cut buckets). All
            -- time: per member, from the summary's error and floor.
            local below, above = 0, slack
            if hours == 0 then
              local e = errs[m] or { 0, 0 }
              below, above = e[1], e[2]
            end
            lo, hi = s - below + head[m], s + above + head[m]
          else
            -- Not in the sum: cut from it at most next, or never in it.
            s, lo, hi = 0, head[m], sum_next + slack + head[m]
          end
          if lower[m] and lower[m] > lo then
            lo = lower[m]
          end
          local count = math.max(s + head[m], lo)
          cand[m] = { count = count, lo = lo, hi = math.max(hi, count) }
          push(los, lo)
        end
      end
      local extra, seen = {}, {}
      for _, list in ipairs({ shorter, hour_cands }) do
        for _, m in ipairs(list) do
          if not seen[m] then
            extra[#extra + 1], seen[m] = m, true
          end
        end
      end
      local got = scores(sum, extra)
      for j2, m in ipairs(extra) do
        sumof[m] = got[j2] -- nil: not in the sum (ipairs would stop there)
      end
      add(extra)
      -- The walk: the sum's members by rank, k + 1 at a time, until no
      -- member left could be an entry or the next count. A member not
      -- walked has at most the first one's count (srest) plus slack in
      -- the sum and hour_rest in the current hour, so the walk stops once
      -- that is below the (k+1)-th lowest count of the candidates. With no
      -- slack and the current hour read whole, a member not walked has its
      -- sum count and no more, so k + 1 walked members (each with at least
      -- its sum count) rank above it: ranked.
      local walked, srest, ranked = 0, 0, false
      local exact_rest = whole and slack == 0
      while true do
        local t = kth(los)
        local chunk = redis.call('ZRANGE', sum, walked, walked + k, 'REV', 'WITHSCORES')
        local take, stop = {}, false
        for j = 1, #chunk, 2 do
          local m, count = chunk[j], tonumber(chunk[j + 1])
          ranked = exact_rest and walked > k
          if ranked or walked >= 5 * c or (t and count + slack + hour_rest < t) then
            srest, stop = count, true
            break
          end
          walked = walked + 1
          if not cand[m] then
            take[#take + 1], sumof[m] = m, count
          end
        end
        add(take)
        if stop or #chunk <= 2 * k then
          break
        end
      end
      -- A member the sum was cut without had at most next: it ranks below
      -- the walked members only when that is below srest.
      ranked = ranked and sum_next < srest
      local rest = math.max(srest, sum_next) + slack + hour_rest
      -- A candidate whose highest count is below the (k+1)-th lowest count
      -- can be neither an entry nor the next count, so it is left out of
      -- the sort (its highest count joins rest).
      local floor_lo = kth(los)
      if floor_lo then
        for m, e in pairs(cand) do
          if e.hi < floor_lo then
            cand[m] = nil
            rest = math.max(rest, e.hi) -- it still bounds what is left out
          end
        end
      end
      local n, kept = cache(base, name, cand, rest, ranked, first_ms)
      counts[#counts + 1] = n
      -- The next window's candidates include this one's entries; their
      -- lowest counts carry over.
      shorter, lower = {}, {}
      for _, e in ipairs(kept) do
        shorter[#shorter + 1] = e[1]
        lower[e[1]] = e[2]
      end
    end
  end
  replies[#replies + 1] = counts
end
return replies
