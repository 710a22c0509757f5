#!lua
-- global_roll.lua: replace one rolled-up global summary (an hour, a day or
-- the all-time summary of one shard), if no one else did in between.
--
-- KEYS[1]  <prefix>:{g:<shard>}:<level>:<n>   sorted set, item -> count
-- KEYS[2]  <prefix>:{g:<shard>}:<level>e:<n>  sorted set, item -> error
-- KEYS[3]  <prefix>:{g:<shard>}:<level>m:<n>  hash: floor, events, version
-- ARGV[1]  the version the caller built on: the summary is replaced only if
--          its stored version is still this one ("" = no summary yet)
-- ARGV[2]  the new version
-- ARGV[3]  floor: the most an item the summary lacks may have had
-- ARGV[4]  events counted in the summary's span
-- ARGV[5]  expiry, unix seconds (0: none)
-- ARGV     then item_1, count_1, error_1, item_2, ...
-- Reply    1 if the summary was replaced, 0 if its version had moved.
--
-- The summary is computed in Go (pkg/store, GlobalRefresher.Roll) from the
-- summaries below it; this script makes its replacement a compare-and-set,
-- so running a rollup twice, or two schedulers at once, changes nothing
-- the second time.
-- #include bulk.lua

local stored = redis.call('HGET', KEYS[3], 'version') or ''
if stored ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1], KEYS[2])
local counts, errs = {}, {}
for i = 6, #ARGV, 3 do
  counts[#counts + 1] = ARGV[i + 1]
  counts[#counts + 1] = ARGV[i]
  if ARGV[i + 2] ~= '0' then
    errs[#errs + 1] = ARGV[i + 2]
    errs[#errs + 1] = ARGV[i]
  end
end
bulk('ZADD', KEYS[1], counts)
bulk('ZADD', KEYS[2], errs)
redis.call('HSET', KEYS[3], 'version', ARGV[2], 'floor', ARGV[3], 'events', ARGV[4])
if ARGV[5] ~= '0' then
  for _, key in ipairs(KEYS) do
    redis.call('EXPIREAT', key, ARGV[5])
  end
end
return 1
