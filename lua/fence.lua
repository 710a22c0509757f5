-- fence.lua: the exactly-once protocol of the fenced scripts (ingest.lua,
-- global_add.lua, activity.lua). It is not a script: package lua puts it
-- in place of each script's "-- #include fence.lua" line, so the protocol
-- has this one copy.
--
-- A writer's counts come from a source, "<topic>/<partition>", read in
-- offset order, and are sent in groups: one key space's (a workspace's, a
-- global shard's, a user's) counts from the offsets first..last of one
-- source. Redis keeps, in a hash in the key space's own slot, the fence:
-- per source, the last offset whose counts are applied. A group applies
-- only if its fence is below first, and moves the fence to last in the same
-- atomic step; a group at or above its fence was applied before (a replay
-- after a crash or a rebalance, or a retry whose reply was lost) and is
-- skipped; a group that straddles the fence (a replay cut differently from
-- the original batch) changes nothing and is reported, and the caller
-- recounts its records after the fence and sends them as a new group. This
-- relies only on what Kafka guarantees: a partition's records are read in
-- offset order, and offsets are committed only after the counts landed.
-- Counts with no source ("") are not fenced: they apply every time.
--
-- A group may come in chunks (ingest.lua): parts of its key space, each
-- fenced on its own under the field "<source>#<chunk>". A chunk's fence is
-- the higher of that field and the source's own, which a whole group moves
-- for every chunk at once, and "<source>#max" is the highest chunk fence,
-- so that a whole group can tell whether every chunk is below it.

-- raise_expiry sets key's expiry to at unless it already expires later.
-- EXPIRETIME is -1 for a key with no expiry yet (set it) and -2 for no key
-- (EXPIREAT does nothing then). Most calls find the expiry already set, so
-- they cost one command, not two.
local function raise_expiry(key, at)
  if redis.call('EXPIRETIME', key) < tonumber(at) then
    redis.call('EXPIREAT', key, at)
  end
end

-- judge says what to do with a group (or chunk) of offsets first..last:
-- 'apply', 'skip', or the fence it straddles. f is the source's fence
-- field (nil or false: none). For a chunk, fc is its own field; for a whole
-- group that may have been written in chunks, fmax the highest chunk fence,
-- and -1 means those chunks are fenced apart (the caller sends it again in
-- chunks).
local function judge(f, first, last, fmax, fc)
  f = tonumber(f) or -1
  local hi = math.max(f, tonumber(fc) or -1, tonumber(fmax) or -1)
  if hi < first then
    return 'apply'
  end
  local lo = math.max(f, tonumber(fc) or -1)
  if lo >= last then
    return 'skip'
  elseif hi == lo then
    return lo
  end
  return -1
end

-- not_applied records a group (or part) judge did not let apply: it returns
-- its events when it is skipped (already applied), and 0 when it
-- straddled, after adding to overlaps the entry that names it: the values
-- of names (its number in the call, and its part's), then the fence.
local function not_applied(verdict, events, overlaps, names)
  if verdict == 'skip' then
    return events
  end
  for _, v in ipairs(names) do
    overlaps[#overlaps + 1] = v
  end
  overlaps[#overlaps + 1] = verdict
  return 0
end

-- fenced_reply is the reply of a fenced script: its counters (an array),
-- then overlaps, the entries naming each group that straddled its fence.
local function fenced_reply(counters, overlaps)
  for _, v in ipairs(overlaps) do
    counters[#counters + 1] = v
  end
  return counters
end
