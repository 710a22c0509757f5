#!lua
-- activity_delete.lua: remove every activity counter of one user (privacy).
--
-- KEYS[1]  roll   <prefix>:{u:<user>}:roll   hash: f and l, the first and
--          last hour the user ever had counts in
-- KEYS[2]  fence  <prefix>:{u:<user>}:fence
--          The user's other keys are named from ARGV[3]: m:<hour> for every
--          hour in f..l, h:<day> for every day and d:<block> for every day
--          block of those hours (see pkg/keys/user.go).
-- ARGV[1]  the oldest hour whose minute hash may still exist (older ones
--          have expired: the caller passes now - minute retention)
-- ARGV[2]  the oldest day whose rollups may still exist
-- ARGV[3]  base, "<prefix>:{u:<user>}:", the user's key prefix
-- Reply    array: keys removed, f, l (-1, -1 when the user has no counts)
--
-- The keys are found from the watermark, not by SCAN: at most minute
-- retention + 1 minute hashes, rollup retention + 1 hour-rollup hashes and
-- their blocks, whatever the size of the keyspace. Atomic, so a batch
-- applied concurrently lands entirely before (and is removed) or entirely
-- after (and stays, with a new watermark).
local roll, fence = KEYS[1], KEYS[2]
local base = ARGV[3]
local marks = redis.call('HMGET', roll, 'f', 'l')
local f, l = tonumber(marks[1]), tonumber(marks[2])
local removed = redis.call('UNLINK', roll, fence)
if f == nil or l == nil then
  return { removed, -1, -1 }
end
local batch = {}
local function flush()
  if #batch > 0 then
    removed = removed + redis.call('UNLINK', unpack(batch))
    batch = {}
  end
end
local function del(key)
  batch[#batch + 1] = key
  if #batch == 500 then
    flush()
  end
end
for h = math.max(f, tonumber(ARGV[1])), l do
  del(base .. 'm:' .. h)
end
local d1, d2 = math.max(math.floor(f / 24), tonumber(ARGV[2])), math.floor(l / 24)
for d = d1, d2 do
  del(base .. 'h:' .. d)
end
for b = math.floor(d1 / 32), math.floor(d2 / 32) do
  del(base .. 'd:' .. b)
end
flush()
return { removed, f, l }
