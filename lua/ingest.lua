#!lua
-- ingest.lua: add pre-aggregated counts to workspaces' running window sums
-- (sum groups) and to their minute buckets (bucket groups).
--
-- Why two kinds of group: the running sum is what the hour's ranking is
-- read from, so it takes every flush at once. A minute bucket is read only
-- later: when its minute leaves the window (refresh.lua subtracts it),
-- when it is folded into its hour (rollup.lua), and by the long windows'
-- current hour and the sparklines. So a worker holds the buckets' counts
-- over many flushes, until their minute ends (ingest.ChannelOptions.
-- BucketAge), and writes each distinct (channel, minute) once per hold
-- instead of once per flush (on workload A a 1 s flush has 0.41 pairs per
-- event, a 15 s hold 0.20), most buckets in one write into an empty set.
--
-- The call is a sequence of groups, each one workspace's counts from one
-- source (a workspace's counts may come from several partitions, and be
-- spread over several calls). A group's kind is one of:
--   's'  a sum group whose buckets a worker holds: pend records that the
--        window's counts of its minutes may wait in a hold
--   'p'  a sum group whose bucket group ('b', same counts) follows it in
--        the same call, so both land at once (no hold)
--   'b'  a bucket group
--   'l'  no counts (b = 0): the mark that a source's held buckets
--        landed, up to its last offset (see "Held counts")
-- KEYS, per group: for a sum group: fence, win, through, minutes, cand,
--   floor, pend, meta, top; for a bucket group: fence, roll, fold, bucket_1 ..
--   bucket_b; for a mark: pend
--   fence     <prefix>:{w:<ws>}:fence           hash, source -> the last offset
--             whose counts are applied (see "Fences" below)
--   win       <prefix>:{w:<ws>}:win:1h          hash, the window's running sum
--             (channel -> count)
--   through   <prefix>:{w:<ws>}:win:1h:through  string, the newest minute already
--             subtracted from win (missing: none yet)
--   minutes   <prefix>:{w:<ws>}:win:1h:minutes  sorted set, the minutes added to
--             win and not yet subtracted (member = score = unix minute)
--   cand      <prefix>:{w:<ws>}:win:1h:cand     sorted set, the window's candidates
--   floor     <prefix>:{w:<ws>}:win:1h:floor    string, the candidates' floor
--   pend      <prefix>:{w:<ws>}:win:1h:pend     hash, the counts held (see below)
--   meta      <prefix>:{w:<ws>}:top:1h:meta     hash, the cached ranking's
--             metadata: its k sets how many candidates cand keeps
--   top       <prefix>:{w:<ws>}:top:1h          sorted set, the cached hour
--             ranking, kept current here (see "The ranking, kept current")
--   roll      <prefix>:{w:<ws>}:roll            hash, the rollup watermarks (rollup.lua)
--             and the hours of the long windows' sums (windows.lua)
--   fold      <prefix>:{w:<ws>}:fold            sorted set, minutes not folded yet
--   bucket_i  <prefix>:{w:<ws>}:m:<minute_i>    sorted set, one minute's counts
-- ARGV[1], ARGV[2]  retention of hour and day buckets, seconds
-- ARGV[3]   c: cand keeps at least the c highest counts, and at least one
--           and a half times the k of the cached ranking (cand.lua's
--           keep_for), which refresh.lua writes to meta
-- ARGV, then per group: kind, base, source, first, last, b, then per
--   bucket: minute, expire_at; then p, and p parts, each: chunk, then per
--   bucket: n, increment_1, member_1, ..., increment_n, member_n
--   base      "<prefix>:{w:<ws>}:", the workspace's key prefix, which names
--             the rollups a late count also goes to: h:<hour>, d:<day>,
--             all and all:err; folding, while rollup.lua folds that
--             minute in chunks (fold_late); win:1h:slide and
--             win:1h:slide:out, while refresh.lua slides a minute out in
--             parts; and win:1h:rescan, whose k sets the candidates kept
--             while refresh.lua rescans the sum
--             (see pkg/keys; same hash tag, so same slot)
--   source    "<topic>/<partition>" the counts were read from, or "" for
--             counts with no source (then no fence applies)
--   first, last  the offsets of the first and last record of source the
--             group's counts span (a batch's for a sum group, a hold's for
--             a bucket group)
--   expire_at is when the bucket leaves the window plus grace; it depends
--             only on the minute, so a late write never extends a bucket's life.
--   chunk     "" for a part that holds the group's every channel, or the
--             chunk number 0..255 of the channels it holds (pkg/store's
--             fenceChunk: FNV-1a of the channel id, mod 256)
--   Increments come before members so that a bucket's first write is one
--   ZADD of the arguments as they are.
-- Reply    array: pairs applied, events skipped as already applied (sum
--          groups only: a bucket group's events were reported by its sum
--          group), 1 if the call's bucket counts may change a long
--          window's sum (see below; else 0), then how many groups kept
--          the cached ranking current with their counts (see "The
--          ranking, kept current") and their numbers in the call (from
--          1), then for each part that
--          overlaps its fence: the group's number in the call (from 1),
--          the part's number in the group (from 1) and the fence, or -1
--          for a whole part whose chunks are fenced apart (the caller
--          sends the group again in chunks).
--
-- Fences: exactly once per workspace, source and kind, by fence.lua's
-- protocol. A sum group's fields are "<source>" and, for chunks,
-- "<source>#<chunk>" and "<source>#max"; a bucket group's are the same
-- with "@b" after the source ("<source>@b", "<source>@b#<chunk>", ...).
-- Where a bucket field is missing, the sum field of the same name stands
-- for it: counts written before buckets were held went to both at once.
-- A sum group, which moves a sum field ahead of its bucket field, first
-- writes the bucket field as it stood, if it is missing. Sum counts of a record always land before its bucket counts (the
-- worker writes a hold only after the sum groups of its batches landed).
--
-- Held counts (pend): an 's' group sets, for each minute of the window it
-- adds counts of, the field "<source>@<minute>" to its last offset: those
-- counts may wait in a hold. Once a hold's bucket groups landed, the
-- worker sends a mark ('l', b = 0, no parts) that deletes the source's
-- fields at or below the last offset they span; what is left is held.
-- refresh.lua subtracts no minute from win while a field names it or an
-- older one, nor rebuilds win from the buckets while any is left: a
-- bucket whose counts are still held would take out less than win added.
-- Bucket groups never touch win, so a minute's counts are subtracted
-- exactly once, from a complete bucket.
--
-- Invariant, kept together with refresh.lua: win is the sum of the counts
-- of the minutes in `minutes` (held or landed), which are the minutes
-- after `through` that have counts. A count for a minute at or before
-- `through` (already subtracted, so out of the window) goes to its bucket
-- only. A minute refresh.lua slides out in parts is at `through` already;
-- a bucket group's count for it also goes to win:1h:slide:out, so that
-- the slide subtracts only what win holds (refresh.lua, "A slide in
-- parts").
--
-- Candidates, so that ranking needs no sorted-set update per pair: every
-- channel whose count in win is above floor is in cand, at that count
-- (a channel in cand at or below floor may hold a lower count than win's).
-- An increment that takes a count above floor writes it to cand. When cand
-- holds more than twice its keep (c, or one and a half times the cached
-- ranking's k, or the k of a rescan under way, if more) channels, those
-- below its keep-th highest count leave it and floor rises to the highest
-- count that left, so cand stays small and the invariant holds. Counts
-- only grow here; refresh.lua keeps it when a minute leaves the window,
-- and reads the top K from cand. While refresh.lua rescans win in parts,
-- the bound is the higher of floor and the rescan's (refresh.lua, "A
-- rescan in parts"): floor starts again from 0 then, so every count
-- raised here goes to cand.
--
-- The ranking, kept current: between two refreshes counts only rise, so
-- the exact top k of win is within the cached ranking's and the counts
-- that rose to at least its k-th count, and every such count rose above
-- floor (the ranking's counts are above it), so it is in `raised`. A ZADD
-- of those into top and a ZREMRANGEBYRANK back to k leave exactly the
-- set a refresh would copy from cand, ties included (a channel at the
-- k-th count outside the ranking was behind it by id, and can only be
-- overtaken). So a sum group updates top itself, and writes computed_at
-- and window_end (Redis's clock) but not window_start: the ranking is
-- exact for the window its meta states. Past copy_above changed counts a
-- copy of cand's top k costs less (cand's k-th count is above floor, since
-- a trim keeps at least k). It leaves the ranking to refresh.lua while a
-- slide or a rescan goes on (win then holds counts the ranking must not
-- show, or cand lacks some), while there is no ranking (or no k in meta),
-- and while a ranking of fewer than k entries is bounded by a floor (it
-- held every channel, and new ones at or below the floor are not in
-- `raised`), nor while win holds a minute before the ranking's
-- window_start (a late count for a minute not slid out yet). Its clock is
-- Redis's (TIME), the refresh's the scheduler's. The caller marks a
-- workspace whose every sum group kept its ranking current as ranked, not
-- dirty: the scheduler then refreshes it when a minute leaves its window,
-- and once at the next minute, so that window_start follows the clock.
--
-- Rollups (bucket groups): a minute already folded into its hour bucket
-- (at or before roll's h) also goes to the hour bucket, and one whose hour
-- is closed (at or before roll's c) also to the day bucket and the
-- all-time summary, so a late count lands in every rollup already made
-- from its minute (the hour, day and all-time keys are named from base;
-- the all-time summary takes a new item at its floor, as rollup.lua does).
-- A minute not folded yet is recorded in fold for rollup.lua. A count for
-- the minute rollup.lua is folding in chunks (roll's fm) keeps that fold's
-- invariant (rollup.lua, "A fold in chunks"; fold_late below).
--
-- Long windows' sums: windows.lua sums each long window's hours before
-- the current one, and records in roll, as "s:<window>", the hour it
-- summed for. Such a sum changes only when a count lands in an hour it
-- covers, so the reply says 1 when a bucket group has counts for an hour
-- other than one of its sums', or has no sum yet: then the caller adds the
-- call's workspaces to the set the scheduler re-sums from
-- (topk:dirty:sums). Counts of the hour every sum is for, the steady
-- state, need no new sum. The verdict reads the counts' minutes, not what
-- the fences let through, so a replay after a crash before that set was
-- written says it again.
--
-- Everything a group does happens in one atomic script, so a bucket never
-- has counts without its TTL and win never disagrees with its minutes.
-- The "#!lua" line (Redis 7 script flags, none set) makes Redis refuse the
-- script up front when it is out of memory, instead of failing it halfway.

-- #include fence.lua
-- #include bulk.lua
-- #include cand.lua

-- scan_part finds the part that starts at a (after its chunk) over b
-- buckets: it returns the ARGV index after it and the index of each
-- bucket's n, skipping the pairs without reading them.
local function scan_part(a, b)
  local at = {}
  for i = 1, b do
    at[i] = a
    a = a + 1 + 2 * tonumber(ARGV[a])
  end
  return a, at
end

-- events_of returns the sum of the increments of a part (its at, over b
-- buckets): the events of a part that is skipped.
local function events_of(at, b)
  local events = 0
  for i = 1, b do
    local n = tonumber(ARGV[at[i]])
    for q = at[i] + 1, at[i] + 2 * n - 1, 2 do
      events = events + tonumber(ARGV[q])
    end
  end
  return events
end

-- read_group reads the group whose arguments start at ARGV[a]: its header,
-- where its buckets' minutes are, and where each part's pairs are. It
-- returns the group and the ARGV index after it.
local function read_group(a)
  local g = { kind = ARGV[a], base = ARGV[a + 1], source = ARGV[a + 2], first = tonumber(ARGV[a + 3]),
    last = tonumber(ARGV[a + 4]), b = tonumber(ARGV[a + 5]), parts = {} }
  g.minutes = a + 6 -- minute_i at g.minutes + 2(i-1), expire_at_i after it
  a = g.minutes + 2 * g.b
  local p = tonumber(ARGV[a])
  a = a + 1
  for j = 1, p do
    local chunk, at = ARGV[a], nil
    a, at = scan_part(a + 1, g.b)
    g.parts[j] = { chunk = chunk, at = at }
  end
  return g, a
end

-- bucket_field names the bucket fence field that stands beside sum field
-- name (see "Fences").
local function bucket_field(source, name)
  return source .. '@b' .. string.sub(name, #source + 1)
end

-- fences reads group g's fence fields (one HMGET) and judges each part: it
-- returns the parts to apply and a function giving a field's value by its
-- sum name, for g's kind (a bucket field, or the sum field standing for it).
-- Each part not applied is added to overlaps or to skipped (a sum group's
-- events only).
local function fences(fence, g, group, overlaps, skipped)
  if g.source == '' then
    return g.parts, nil, skipped
  end
  local names = { g.source, g.source .. '#max' }
  for _, part in ipairs(g.parts) do
    if part.chunk ~= '' then
      part.field = g.source .. '#' .. part.chunk
      names[#names + 1] = part.field
    end
  end
  local fields = {} -- and the bucket fields, to judge by or to carry over
  for i, name in ipairs(names) do
    fields[i], fields[#names + i] = name, bucket_field(g.source, name)
  end
  local got = redis.call('HMGET', fence, unpack(fields))
  local v = {}
  for i, name in ipairs(fields) do
    v[name] = got[i]
  end
  local value = function(name)
    return v[name]
  end
  if g.kind == 'b' then
    value = function(name)
      local b = v[bucket_field(g.source, name)]
      if b then
        return b
      end
      return v[name]
    end
  end
  local apply = {}
  for j, part in ipairs(g.parts) do
    local verdict
    if part.field then
      verdict = judge(value(g.source), g.first, g.last, nil, value(part.field))
    else
      verdict = judge(value(g.source), g.first, g.last, value(g.source .. '#max'))
    end
    if verdict == 'apply' then
      apply[#apply + 1] = part
    else
      local events = (verdict == 'skip' and g.kind ~= 'b') and events_of(part.at, g.b) or 0
      skipped = skipped + not_applied(verdict, events, overlaps, { group, j })
    end
  end
  return apply, { v = v, value = value }, skipped
end

-- move_fences moves the fence fields of the applied parts of group g to
-- its last offset; f is what fences returned. A sum group first writes
-- each bucket field it leaves behind as it stood (see "Fences").
local function move_fences(fence, g, apply, f)
  local moves = {}
  local name = function(field)
    if g.kind == 'b' then
      return bucket_field(g.source, field)
    end
    return field
  end
  local move = function(field)
    if g.kind ~= 'b' and not f.v[bucket_field(g.source, field)] then
      moves[#moves + 1], moves[#moves + 2] = bucket_field(g.source, field), tonumber(f.v[field]) or -1
    end
    moves[#moves + 1], moves[#moves + 2] = name(field), g.last
  end
  local max = tonumber(f.value(g.source .. '#max')) or -1
  for _, part in ipairs(apply) do
    if part.field then
      move(part.field)
      if max < g.last then
        max = g.last
        move(g.source .. '#max')
      end
    else
      move(g.source)
    end
  end
  redis.call('HSET', fence, unpack(moves))
end

-- add_late adds a late count to the rollups its minute was folded into.
-- (The caller keeps roll's f, the first hour with a bucket, at or below
-- hour.)
local function add_late(base, hour, closed, floor, hret, dret, member, n)
  local h = base .. 'h:' .. hour
  redis.call('ZINCRBY', h, n, member)
  redis.call('EXPIREAT', h, (hour + 1) * 3600 + hret)
  if closed then
    local day = math.floor(hour / 24)
    local d = base .. 'd:' .. day
    redis.call('ZINCRBY', d, n, member)
    redis.call('EXPIREAT', d, (day + 1) * 86400 + dret)
    if redis.call('ZSCORE', base .. 'all', member) then
      redis.call('ZINCRBY', base .. 'all', n, member)
    else
      redis.call('ZADD', base .. 'all', floor + n, member)
      if floor > 0 then
        redis.call('ZADD', base .. 'all:err', floor, member)
      end
    end
  end
end

-- fold_late adds a count to the bucket of the minute rollup.lua is
-- folding in chunks (roll's fm and fr, in marks), keeping its invariant:
-- the bucket's top fr members are exactly folding's, at their bucket
-- counts, and are in the hour bucket. A member of folding gains the count
-- in all three; one that this count lifts into the top fr joins folding
-- and the hour bucket with its whole count, and fr grows by one; any other
-- stays below the top fr, for a later chunk.
local function fold_late(base, bucket, hour, hret, marks, member, n)
  local folding = base .. 'folding'
  local had = redis.call('ZSCORE', folding, member)
  local count = redis.call('ZINCRBY', bucket, n, member)
  local add
  if had then
    add = n
    redis.call('ZINCRBY', folding, n, member)
  elseif redis.call('ZREVRANK', bucket, member) < marks.fr then
    add = count
    redis.call('ZADD', folding, count, member)
    marks.fr = marks.fr + 1
  end
  if add then
    local h = base .. 'h:' .. hour
    redis.call('ZINCRBY', h, add, member)
    redis.call('EXPIREAT', h, (hour + 1) * 3600 + hret)
  end
end

-- roll_marks reads a workspace's roll hash, a handful of fields: the
-- rollups' watermarks by name, and the hours of its long windows' sums.
local function roll_marks(roll)
  local fields = redis.call('HGETALL', roll)
  local marks, sums = {}, {}
  for j = 1, #fields, 2 do
    if string.sub(fields[j], 1, 2) == 's:' then
      sums[#sums + 1] = tonumber(fields[j + 1])
    else
      marks[fields[j]] = tonumber(fields[j + 1])
    end
  end
  return marks, sums
end

-- resums says whether group g's counts may change a long window's sum,
-- given the hours the sums are for (sums; see above).
local function resums(sums, g)
  if #sums == 0 then
    return true
  end
  for i = 0, g.b - 1 do
    local hour = math.floor(tonumber(ARGV[g.minutes + 2 * i]) / 60)
    for _, h in ipairs(sums) do
      if h ~= hour then
        return true
      end
    end
  end
  return false
end

-- hold records in pend that source's counts of minutes (a list), up to
-- offset last, may wait in a hold (see "Held counts").
local function hold(pend, source, last, minutes, expire_at)
  local fields = {}
  for _, m in ipairs(minutes) do
    fields[#fields + 1], fields[#fields + 2] = source .. '@' .. m, last
  end
  redis.call('HSET', pend, unpack(fields))
  raise_expiry(pend, expire_at)
end

-- copy_above is how many changed counts an incremental update of the
-- ranking takes at most: past it a copy of cand's top k costs less (in one
-- script on a quiet Redis, a k = 100 ranking: the copy 76 µs, a ZADD of
-- 20 changed counts 57 µs, of 50 143 µs).
local copy_above = 25

-- keep_top keeps the cached ranking top (meta, its metadata; kk, its k;
-- since, its window_start in unix ms) current with the counts a sum group
-- raised above floor, cand's floor when the group began (see "The
-- ranking, kept current"; floor_now is cand's floor after the group's
-- trim), and says whether it did. rescanning says whether refresh.lua
-- rescans win (add_sum read the rescan's k).
local function keep_top(base, top, meta, kk, since, minutes, cand, floor, floor_now, raised, rescanning)
  if kk == 0 or rescanning or redis.call('EXISTS', base .. 'win:1h:slide') > 0 then
    return false
  end
  -- win holds a minute before the ranking's window (a late count for a
  -- minute the scheduler has not slid out yet): only a refresh can say.
  local oldest = tonumber(redis.call('ZRANGE', minutes, 0, 0)[1])
  if oldest and oldest * 60000 < since then
    return false
  end
  local n = redis.call('ZCARD', top)
  if n == 0 or (n < kk and floor > 0) then
    return false
  end
  local least = -1 -- fewer than k entries: every count raised may enter
  if n >= kk then
    least = tonumber(redis.call('ZRANGE', top, 0, 0, 'WITHSCORES')[2])
  end
  local changed = {}
  for i = 1, #raised, 2 do
    if raised[i] >= least then
      changed[#changed + 1], changed[#changed + 2] = raised[i], raised[i + 1]
    end
  end
  if #changed > 2 * copy_above then
    if not ranks(cand, floor_now, kk) then
      return false -- cannot happen while trims keep 1.5 k (cand.lua); a refresh will tell
    end
    local expires = redis.call('EXPIRETIME', top)
    redis.call('ZRANGESTORE', top, cand, 0, kk - 1, 'REV')
    if expires > 0 then
      redis.call('EXPIREAT', top, expires)
    end
  elseif #changed > 0 then
    bulk('ZADD', top, changed)
    redis.call('ZREMRANGEBYRANK', top, 0, -kk - 1)
  end
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('HSET', meta, 'computed_at', now, 'window_end', now)
  return true
end

-- add_sum adds a sum group's applied parts to win and cand (keys from
-- KEYS[k], its fence), keeps the cached ranking current with them, and
-- returns the pairs added, the latest expiry of its minutes and whether
-- it kept the ranking current.
local function add_sum(k, g, apply, c)
  local win, minutes, cand, floor_key, pend = KEYS[k + 1], KEYS[k + 3], KEYS[k + 4], KEYS[k + 5], KEYS[k + 6]
  -- The candidates the cached ranking needs, and while a rescan goes on
  -- those of the ranking it is for (refresh.lua, "A rescan in parts"):
  -- trimmed to fewer, a rescan for a larger k would never end in one.
  local meta = redis.call('HMGET', KEYS[k + 7], 'k', 'window_start')
  local ranked, since = tonumber(meta[1]) or 0, tonumber(meta[2]) or 0 -- the ranking's k and window
  local rescanning = tonumber(redis.call('HGET', g.base .. 'win:1h:rescan', 'k')) or 0
  local keep = keep_for(c, math.max(ranked, rescanning))
  local through = tonumber(redis.call('GET', KEYS[k + 2]))
  local cand_floor = tonumber(redis.call('GET', floor_key)) or 0
  local added, latest, latest_in_win, in_win = 0, 0, 0, {}
  -- Counts that rose above the floor, written to cand at once (one
  -- sorted-set call instead of one per channel; a channel listed twice,
  -- for two minutes, ends at its later, higher count).
  local raised = {}
  for i = 1, g.b do
    local mi, expire_at = tonumber(ARGV[g.minutes + 2 * (i - 1)]), tonumber(ARGV[g.minutes + 2 * i - 1])
    latest = math.max(latest, expire_at)
    if through == nil or mi > through then
      local pairs_in = 0
      for _, part in ipairs(apply) do
        local at = part.at[i]
        local n = tonumber(ARGV[at])
        for q = at + 1, at + 2 * n - 1, 2 do
          local count = redis.call('HINCRBY', win, ARGV[q + 1], ARGV[q])
          if count > cand_floor then
            raised[#raised + 1] = count
            raised[#raised + 1] = ARGV[q + 1]
          end
        end
        pairs_in = pairs_in + n
      end
      -- A minute no applied part has counts for is left out: a minute in
      -- `minutes` must have counts.
      if pairs_in > 0 then
        redis.call('ZADD', minutes, mi, mi)
        latest_in_win = math.max(latest_in_win, expire_at)
        in_win[#in_win + 1] = mi
        added = added + pairs_in
      end
    end
  end
  bulk('ZADD', cand, raised)
  local floor_now = cand_floor -- cand's floor after this group's trim
  if latest_in_win > 0 then
    raise_expiry(win, latest_in_win)
    raise_expiry(minutes, latest_in_win)
    raise_expiry(cand, latest_in_win)
    floor_now = trim(cand, floor_key, cand_floor, keep)
    if floor_now > 0 then
      raise_expiry(floor_key, latest_in_win)
    end
    if g.kind == 's' and g.source ~= '' then
      hold(pend, g.source, g.last, in_win, latest_in_win)
    end
  end
  local kept = keep_top(g.base, KEYS[k + 8], KEYS[k + 7], ranked, since, minutes, cand, cand_floor, floor_now, raised,
    rescanning > 0)
  return added, latest, kept
end

-- add_counts adds list's pairs (increment, member, ...) to sorted set key:
-- one ZMSCORE reads the members' counts and one ZADD sets their sums
-- (written into list). The members must be distinct, as a bucket group's
-- are (its parts hold distinct channels; a ZADD of a member twice would
-- keep one sum). A ZINCRBY each cost a command per pair, and a ZUNIONSTORE
-- through a scratch set rewrote the whole set; the held buckets' Redis
-- time fell by 17 to 20% without them (BENCHMARKS.md, "Counts added to a
-- bucket in one ZMSCORE and one ZADD"). The counts are integers well
-- below 2^53: exact in Lua's numbers, and in the ZADD, which Redis sends
-- with %.17g.
local function add_counts(key, list)
  local members = {}
  for j = 2, #list, 2 do
    members[#members + 1] = list[j]
  end
  for j, old in ipairs(bulk('ZMSCORE', key, members)) do
    if old then
      list[2 * j - 1] = tonumber(old) + tonumber(list[2 * j - 1])
    end
  end
  bulk('ZADD', key, list)
end

-- add_buckets adds a bucket group's applied parts to its buckets (keys
-- after KEYS[k], its fence), and to the rollups made from a late minute;
-- marks are roll's. It returns the pairs added and the latest expiry of
-- the buckets written.
local function add_buckets(k, g, apply, marks, hret, dret)
  local roll, fold = KEYS[k + 1], KEYS[k + 2]
  local sliding = redis.call('HGET', g.base .. 'win:1h:slide', 'm')
  local folded, closed, floor, first_hour = marks.h, marks.c, marks.floor or 0, marks.f
  local added, latest = 0, 0
  for i = 1, g.b do
    local bucket = KEYS[k + 2 + i]
    local minute, expire_at = ARGV[g.minutes + 2 * (i - 1)], ARGV[g.minutes + 2 * i - 1]
    local mi = tonumber(minute)
    local hour = math.floor(mi / 60)
    local late = folded ~= nil and mi <= folded
    local hour_closed = closed ~= nil and hour <= closed
    -- A bucket's first write is one ZADD of the pairs as they come: the
    -- parts of a group hold distinct channels. A later one (a hold that
    -- ended early, late records, a large workspace's hold in several
    -- calls, every flush but the first without holds) adds the pairs of
    -- all the parts with one ZMSCORE and one ZADD (add_counts): a cost
    -- that follows the pairs, not the bucket. A minute being folded in
    -- chunks takes them one at a time (fold_late).
    local size = redis.call('ZCARD', bucket)
    local folding = marks.fm == mi and not late
    local fr = marks.fr
    local pairs_in, adding = 0, {}
    for _, part in ipairs(apply) do
      local at = part.at[i]
      local n = tonumber(ARGV[at])
      if n > 0 then
        if folding then
          for q = at + 1, at + 2 * n - 1, 2 do
            fold_late(g.base, bucket, hour, hret, marks, ARGV[q + 1], ARGV[q])
          end
        elseif size == 0 then
          bulk('ZADD', bucket, ARGV, at + 1, at + 2 * n)
        else
          for q = at + 1, at + 2 * n do
            adding[#adding + 1] = ARGV[q]
          end
        end
        if minute == sliding then
          local out = g.base .. 'win:1h:slide:out'
          for q = at + 1, at + 2 * n - 1, 2 do
            redis.call('HINCRBY', out, ARGV[q + 1], ARGV[q])
          end
          raise_expiry(out, expire_at)
        end
        if late then
          if first_hour == nil or hour < first_hour then
            first_hour = hour
            redis.call('HSET', roll, 'f', hour)
          end
          for q = at + 1, at + 2 * n - 1, 2 do
            add_late(g.base, hour, hour_closed, floor, hret, dret, ARGV[q + 1], tonumber(ARGV[q]))
          end
        end
        pairs_in = pairs_in + n
      end
    end
    if #adding > 0 then
      add_counts(bucket, adding)
    end
    if marks.fr ~= fr then
      redis.call('HSET', roll, 'fr', marks.fr)
    end
    -- A bucket no applied part writes to is left alone.
    if pairs_in > 0 then
      redis.call('EXPIREAT', bucket, expire_at)
      if not late then
        redis.call('ZADD', fold, minute, minute)
        raise_expiry(fold, expire_at)
      end
      latest = math.max(latest, tonumber(expire_at))
      added = added + pairs_in
    end
  end
  return added, latest
end

local hret, dret, c = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local applied, skipped, overlaps, resum, kept = 0, 0, {}, 0, {}

-- landed deletes pend's fields of source at or below offset last: their
-- counts' buckets landed (see "Held counts").
local function landed(pend, source, last)
  local fields = redis.call('HGETALL', pend)
  local prefix, gone = source .. '@', {}
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, #prefix) == prefix and tonumber(fields[i + 1]) <= last then
      gone[#gone + 1] = fields[i]
    end
  end
  if #gone > 0 then
    redis.call('HDEL', pend, unpack(gone))
  end
end

-- write does group g (its keys from KEYS[k]) and returns how many keys it
-- has: it judges each part against its fence, applies those it may, and
-- moves the fence; a mark clears pend's fields it speaks for.
local function write(k, g, group)
  if g.kind == 'l' then
    landed(KEYS[k], g.source, g.last)
    return 1
  end
  local fence = KEYS[k]
  local marks
  if g.kind == 'b' then
    local sums
    marks, sums = roll_marks(KEYS[k + 1])
    if resum == 0 and resums(sums, g) then
      resum = 1
    end
  end
  local apply, f
  apply, f, skipped = fences(fence, g, group, overlaps, skipped)
  if #apply > 0 then
    local added, latest, current
    if g.kind == 'b' then
      added, latest = add_buckets(k, g, apply, marks, hret, dret)
    else
      added, latest, current = add_sum(k, g, apply, c)
      -- A part skipped or straddling its fence came with an earlier call,
      -- whose workspace may not have been marked: kept only when whole.
      if current and #apply == #g.parts then
        kept[#kept + 1] = group
      end
    end
    applied = applied + added
    if f then
      -- The fence outlives the buckets it speaks for: once they expired, a
      -- replay of those records is too old to count anyway.
      move_fences(fence, g, apply, f)
      raise_expiry(fence, latest)
    end
  end
  if g.kind == 'b' then
    return 3 + g.b
  end
  return 9
end

local k, a, group = 1, 4, 0
while k <= #KEYS do
  group = group + 1
  local g
  g, a = read_group(a)
  k = k + write(k, g, group)
end
local counters = { applied, skipped, resum, #kept }
for _, g in ipairs(kept) do
  counters[#counters + 1] = g
end
return fenced_reply(counters, overlaps)
