#!lua
-- global_cache.lua: replace the cached global ranking atomically.
--
-- KEYS[1]  cached ranking, <prefix>:{g}:top:<window> (sorted set, item -> estimated count)
-- KEYS[2]  per-item error bounds, <prefix>:{g}:top:<window>:err (hash, item -> bound)
-- KEYS[3]  metadata, <prefix>:{g}:top:<window>:meta (hash)
-- ARGV[1]  ttl of the three keys, seconds
-- ARGV[2]  number of metadata field/value pairs that follow
-- ARGV     field_1, value_1, ...   (computed_at, window_start, window_end, k,
--                                   backend, events, error_bound, ...)
-- ARGV     then item_1, count_1, bound_1, item_2, ...
-- Reply    integer: the number of items cached.
local ttl = ARGV[1]
local nmeta = tonumber(ARGV[2])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[3], unpack(ARGV, 3, 2 + 2 * nmeta))
redis.call('EXPIRE', KEYS[3], ttl)
local n = 0
for i = 3 + 2 * nmeta, #ARGV, 3 do
  redis.call('ZADD', KEYS[1], ARGV[i + 1], ARGV[i])
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 2])
  n = n + 1
end
if n > 0 then
  redis.call('EXPIRE', KEYS[1], ttl)
  redis.call('EXPIRE', KEYS[2], ttl)
end
return n
