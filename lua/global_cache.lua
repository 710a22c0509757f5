#!lua
-- global_cache.lua: replace a cached global ranking atomically.
--
-- KEYS[1]  cached ranking, <prefix>:{g}:top:<window> (sorted set, item -> estimated count;
--          for the rising ranking, <window> "rising", item -> estimated growth)
-- KEYS[2]  per-item error bounds, <prefix>:{g}:top:<window>:err (hash, item -> bound)
-- KEYS[3]  metadata, <prefix>:{g}:top:<window>:meta (hash)
-- KEYS[4]  optional: one more value per item, <prefix>:{g}:top:rising:prev
--          (hash, item -> estimated count of the hour before)
-- ARGV[1]  ttl of the keys, seconds
-- ARGV[2]  number of metadata field/value pairs that follow
-- ARGV     field_1, value_1, ...   (computed_at, window_start, window_end, k,
--                                   backend, events, error_bound, ...)
-- ARGV     then item_1, count_1, bound_1[, value_1], item_2, ...
-- Reply    integer: the number of items cached.
local ttl = ARGV[1]
local nmeta = tonumber(ARGV[2])
local extra = KEYS[4]
local width = extra and 4 or 3
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if extra then
  redis.call('DEL', extra)
end
redis.call('HSET', KEYS[3], unpack(ARGV, 3, 2 + 2 * nmeta))
redis.call('EXPIRE', KEYS[3], ttl)
local n = 0
for i = 3 + 2 * nmeta, #ARGV, width do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
  if extra then
    redis.call('HSET', extra, ARGV[i], ARGV[i + 3])
  end
  n = n + 1
end
if n > 0 then
  for _, key in ipairs(KEYS) do
    if key ~= KEYS[3] then
      redis.call('EXPIRE', key, ttl)
    end
  end
end
return n
