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
-- ARGV[4]  c, the members of each sum taken as candidates
-- ARGV[5]  ttl of the cached results of finite windows, seconds
-- ARGV[6]  w, the number of windows
-- ARGV     then per window, shortest first: name, hours (0: all time); then
--          per group: base, "<prefix>:{w:<ws>}:", the workspace's key prefix
-- Reply    array, per group: per window, the entries cached, or -1 when the
--          window's sum is not for the current hour yet (left as it was).
--
-- Exactness. A long window W at hour H is its sum S (the hours before H)
-- plus the current hour's counts C (h:<H> and the minute buckets of H not
-- folded yet). The candidates are the sum's top c members (with their
-- ties), each current-hour bucket's top k, the hour ranking's entries and
-- the previous (shorter) window's entries. Every other member x has S(x)
-- at most the sum's rest (the next count below its top c, or next when
-- the sum was cut) plus slack, and C(x) at most the sum of the buckets' k-th
-- counts, so it cannot outrank an entry whose lowest count is above that;
-- where it could, the error bound grows to cover it. Windows nest (1h in
-- 24h in 7d in 30d in all time), so a member's lowest count in a shorter
-- window is one in the longer too: a longer window never shows less than
-- a shorter one. Each entry's error bound covers the sum's slack (cut
-- buckets, the all-time summary's error and floor); an entry is marked "!"
-- when its lowest possible count reaches the highest of every member left
-- out.
--
-- Ranking: count descending, ties by member in descending byte order, as
-- refresh.lua's.
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

-- scores returns key's score of each member (nil where absent), in chunks
-- that fit Lua's stack.
local function scores(key, members)
  local out = {}
  for i = 1, #members, 4000 do
    local part = redis.call('ZMSCORE', key, unpack(members, i, math.min(i + 3999, #members)))
    for j = 1, #part do
      out[i + j - 1] = tonumber(part[j])
    end
  end
  return out
end

-- top_of returns key's top n members as {member, count} and the highest
-- count of every member it leaves out (0: none left out). With ties, it
-- also returns up to 4n members tied with the n-th, so that a tie at the
-- cut does not make an exact ranking look inexact.
local function top_of(key, n, ties)
  local top = pairs_of(redis.call('ZRANGE', key, 0, n - 1, 'REV', 'WITHSCORES'))
  if #top < n then
    return top, 0
  end
  local last = top[#top][2]
  if not ties then
    return top, last
  end
  local tied = pairs_of(redis.call('ZRANGE', key, last, last, 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', 0, 4 * n))
  local seen = {}
  for _, e in ipairs(top) do
    seen[e[1]] = true
  end
  for _, e in ipairs(tied) do
    if not seen[e[1]] then
      top[#top + 1] = e
    end
  end
  if #tied >= 4 * n then
    return top, last -- more ties than taken: the rest may equal the last
  end
  local after = redis.call('ZRANGE', key, '(' .. last, '-inf', 'BYSCORE', 'REV', 'WITHSCORES', 'LIMIT', 0, 1)
  if #after == 0 then
    return top, 0
  end
  return top, tonumber(after[2])
end

-- top_k returns the k highest of the scored candidates in ranking order,
-- as {member, e}; the highest possible count of every member left out (at
-- least rest, that of every member not a candidate); and the count of the
-- next member in the ranking (0: none). cand: member -> {count, lo, hi}.
-- A window weighs up to a few thousand candidates, so only the top k are
-- sorted with a Lua comparator: a plain sort of the counts (compared in C)
-- finds the k-th count, the members above it are sorted by rank and those
-- at it by member alone.
local function top_k(cand, rest)
  local counts = {}
  for _, e in pairs(cand) do
    counts[#counts + 1] = e.count
  end
  local n = #counts
  if n == 0 then
    return {}, rest, 0
  end
  table.sort(counts)
  local kth = counts[math.max(n - k + 1, 1)]
  local list, tied = {}, {}
  for member, e in pairs(cand) do
    if e.count > kth then
      list[#list + 1] = { member, e }
    elseif e.count == kth then
      tied[#tied + 1] = member
    end
  end
  table.sort(list, function(a, b)
    if a[2].count ~= b[2].count then
      return a[2].count > b[2].count
    end
    return a[1] > b[1]
  end)
  table.sort(tied)
  for j = #tied, 1, -1 do
    if #list == k then
      break
    end
    list[#list + 1] = { tied[j], cand[tied[j]] }
  end
  local out_hi, next = rest, 0
  if n > k then
    next = counts[n - k]
    local ranked = {}
    for _, e in ipairs(list) do
      ranked[e[1]] = true
    end
    for member, e in pairs(cand) do
      if not ranked[member] then
        out_hi = math.max(out_hi, e.hi)
      end
    end
  end
  return list, out_hi, next
end

-- cache writes one window's top k of the scored candidates and returns the
-- number of entries written and the entries, as {member, lo}. cand: member
-- -> {count, lo, hi}; rest is the highest possible count of every member
-- not a candidate.
local function cache(base, name, cand, rest, first_ms)
  local list, out_hi, next = top_k(cand, rest)
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
    redis.call('ZADD', top, unpack(zadd))
    redis.call('HSET', errs, unpack(fields))
    expire(top)
    expire(errs)
  end
  -- A member left out may count up to out_hi: the ranking is exact only
  -- when none could pass the last entry (or tie it, for members that are
  -- not candidates, whose ids are unknown); otherwise the bound grows to
  -- cover how far one might lie above the last count.
  local last_lo, last_count = 0, 0
  if #list == k then
    last_lo, last_count = list[k][2].lo, list[k][2].count
  end
  if out_hi > last_lo or (rest > 0 and rest >= last_lo) then
    bound = math.max(bound, out_hi - last_count, 1)
  end
  redis.call('HSET', meta, 'computed_at', now_ms, 'window_start', first_ms, 'window_end', now_ms,
    'k', k, 'error_bound', bound, 'next', next)
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
  local first_hour = tonumber(redis.call('HGET', roll, 'f'))
  -- Candidates of the current hour: each head bucket's top k; a member
  -- outside all of them has at most the sum of their rests.
  local hour_cands, hour_rest = {}, 0
  for _, key in ipairs(heads) do
    local top, rest = top_of(key, k, false)
    for _, e in ipairs(top) do
      hour_cands[#hour_cands + 1] = e[1]
    end
    hour_rest = hour_rest + rest
  end
  local head = {} -- member -> its count in the current hour, once read
  local function read_head(members)
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
      -- A member outside the candidates had at most the sum's rest, or
      -- next if the sum was cut without it.
      local top, sum_rest = top_of(sum, c, true)
      sum_rest = math.max(sum_rest, sum_next)
      local members, seen, sumof = {}, {}, {}
      for _, e in ipairs(top) do
        members[#members + 1], seen[e[1]], sumof[e[1]] = e[1], true, e[2]
      end
      local extra = {}
      for _, list in ipairs({ shorter, hour_cands }) do
        for _, m in ipairs(list) do
          if not seen[m] then
            extra[#extra + 1], seen[m] = m, true
            members[#members + 1] = m
          end
        end
      end
      for j2, v in ipairs(scores(sum, extra)) do
        sumof[extra[j2]] = v
      end
      local errs = {}
      if hours == 0 and not empty then
        -- Only the candidates' errors: the hash holds one per member of
        -- the all-time sum, up to --rollup-keep of them.
        for i2 = 1, #members, 4000 do
          local part = { unpack(members, i2, math.min(i2 + 3999, #members)) }
          local raw = redis.call('HMGET', base .. 'base:all:err', unpack(part))
          for j2, v in ipairs(part) do
            if raw[j2] then
              local b, a = string.match(raw[j2], '^(%d+),(%d+)$')
              errs[v] = { tonumber(b), tonumber(a) }
            end
          end
        end
      end
      read_head(members)
      local cand = {}
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
          s = 0
          lo, hi = head[m], sum_rest + slack + head[m]
        end
        local count = s + head[m]
        if lower[m] and lower[m] > lo then
          lo = lower[m]
        end
        count = math.max(count, lo)
        cand[m] = { count = count, lo = lo, hi = math.max(hi, count) }
      end
      local rest = sum_rest + slack + hour_rest
      -- The k-th highest lowest count among the sum's top members: a
      -- candidate whose highest count is below it cannot be an entry, so
      -- it is left out of the sort (its highest count joins rest).
      local los = {}
      for _, e in ipairs(top) do
        los[#los + 1] = cand[e[1]].lo
      end
      if #los >= k then
        table.sort(los)
        local floor_lo = los[#los - k + 1]
        for m, e in pairs(cand) do
          if e.hi < floor_lo then
            cand[m] = nil
            rest = math.max(rest, e.hi) -- it still bounds what is left out
          end
        end
      end
      local n, kept = cache(base, name, cand, rest, first_ms)
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
