#!lua
-- geo.lua: apply one batch of pre-aggregated geo counts: per (cell, hour),
-- events per type and the distinct user ids seen, per type and for all
-- types (package geo builds the batch and the calls).
--
-- KEYS     per group (one cell and one hour), in order; on Redis Cluster
--          every key of a call belongs to one cell, so to one hash slot:
--            <prefix>:{geo:<cell>}:h:<unix_hour>         hash, "<type>" -> events, "*" -> all types
--            <prefix>:{geo:<cell>}:u:<unix_hour>         HyperLogLog of the user ids, all types
--            <prefix>:{geo:<cell>}:u:<unix_hour>:<type>  HyperLogLog of the user ids of one type,
--                                                        one key per user list of the group (below)
-- ARGV     for each group, in KEYS order:
--            expire_at   unix seconds (hour end + retention) for every key of the group
--            n           number of (type, count) pairs that follow
--            type_1, count_1, ..., type_n, count_n
--            m           number of user lists that follow, one per type key of the group
--            for each list: u, then user_1, ..., user_u (the users of that type)
-- Reply    integer: the events added (the sum of the counts).
--
-- "*" gets the sum of the group's counts. Each list's users go into its
-- type's HyperLogLog and into the all-types one (a user with events of two
-- types is added to it twice, which changes nothing). A group may come with
-- no pairs (more user ids of a group split over calls) or no lists. The
-- counts are at-least-once: a call sent again after its reply was lost, or
-- a batch replayed, adds them again; PFADD of the same ids changes nothing.
--
-- The "#!lua" line (Redis 7 script flags, none set) makes Redis refuse the
-- script up front when it is out of memory, instead of failing it halfway.
local chunk = 1000 -- user ids per PFADD: unpack puts them on Lua's stack (8000 at most)
local k = 1
local a = 1
local added = 0
while k <= #KEYS do
  local hour, users = KEYS[k], KEYS[k + 1]
  k = k + 2
  local expire_at = ARGV[a]
  local n = tonumber(ARGV[a + 1])
  a = a + 2
  local sum = 0
  for _ = 1, n do
    local c = tonumber(ARGV[a + 1])
    redis.call('HINCRBY', hour, ARGV[a], c)
    sum = sum + c
    a = a + 2
  end
  -- The expiry depends on the hour alone, so it is set when a cell-hour's
  -- keys are created: when "*" starts at this call's sum.
  local new = false
  if n > 0 then
    new = redis.call('HINCRBY', hour, '*', sum) == sum
    if new then
      redis.call('EXPIREAT', hour, expire_at)
    end
  end
  added = added + sum
  local m = tonumber(ARGV[a])
  a = a + 1
  for _ = 1, m do
    local typed = KEYS[k]
    k = k + 1
    local u = tonumber(ARGV[a])
    a = a + 1
    local j = 0
    while j < u do
      local ids = {}
      for i = 1, math.min(chunk, u - j) do
        ids[i] = ARGV[a + j + i - 1]
      end
      redis.call('PFADD', users, unpack(ids))
      redis.call('PFADD', typed, unpack(ids))
      j = j + #ids
    end
    a = a + u
    -- NX rather than "when new": a type's HyperLogLog can be younger than
    -- its hash field (hours counted by a version without per-type users),
    -- and must not be left without an expiry.
    redis.call('EXPIREAT', typed, expire_at, 'NX')
  end
  -- (A call with users only continues a group split over calls: its
  -- HyperLogLog may be the one created.)
  if m > 0 and (new or n == 0) then
    redis.call('EXPIREAT', users, expire_at)
  end
end
return added
