#!lua
-- global_union.lua: sum one shard's per-minute Space-Saving summaries over a
-- window and return its heaviest items with their error terms.
--
-- KEYS[1]  scratch sorted set for the summed counts, <prefix>:{g:<shard>}:u
-- KEYS[2]  scratch sorted set for the summed errors, <prefix>:{g:<shard>}:ue
-- KEYS     then W keys ss:<minute>, W keys sse:<minute>, W keys n:<minute>
--          for the W minutes of the window (missing keys are empty)
-- ARGV[1]  m, the capacity of every summary
-- ARGV[2]  c, the number of candidates to return
-- Reply    { minsum, events, item_1, count_1, err_1, ..., item_c, count_c, err_c }
--          minsum   sum over the window's full summaries of their smallest
--                   count: the most an item can have had in minutes whose
--                   summary does not hold it
--          events   events counted by this shard in the window
--          count_i  sum of the item's counts where monitored (an estimate)
--          err_i    sum of its errors there: count_i - err_i <= true count
-- All numbers are returned as strings.
local w = (#KEYS - 2) / 3
local m = tonumber(ARGV[1])
local c = tonumber(ARGV[2])
redis.call('ZUNIONSTORE', KEYS[1], w, unpack(KEYS, 3, 2 + w))
redis.call('ZUNIONSTORE', KEYS[2], w, unpack(KEYS, 3 + w, 2 + 2 * w))
local minsum, events = 0, 0
for i = 1, w do
  local ss = KEYS[2 + i]
  if redis.call('ZCARD', ss) >= m then
    minsum = minsum + tonumber(redis.call('ZRANGE', ss, 0, 0, 'WITHSCORES')[2])
  end
  events = events + tonumber(redis.call('GET', KEYS[2 + 2 * w + i]) or 0)
end
local top = redis.call('ZRANGE', KEYS[1], 0, c - 1, 'REV', 'WITHSCORES')
local reply = { tostring(minsum), tostring(events) }
for i = 1, #top, 2 do
  local err = redis.call('ZSCORE', KEYS[2], top[i]) or '0'
  reply[#reply + 1] = top[i]
  reply[#reply + 1] = top[i + 1]
  reply[#reply + 1] = err
end
redis.call('DEL', KEYS[1], KEYS[2])
return reply
