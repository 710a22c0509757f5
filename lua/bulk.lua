-- bulk.lua: one command over a list longer than Lua's stack. It is not a
-- script: package lua puts it in place of each script's "-- #include
-- bulk.lua" line, as it does fence.lua, so the scripts share this copy.
--
-- unpack puts at most about 8,000 values on Lua's stack, so a list goes
-- in calls of at most 4,000 values: an even number, so that score-member
-- and field-value pairs stay together.

-- bulk calls cmd on key with list[from..to] appended (by default the
-- whole list), at most 4,000 values a call, and returns the calls' array
-- replies concatenated: for ZMSCORE or HMGET, a value for each one sent,
-- false where there is none.
local function bulk(cmd, key, list, from, to)
  from, to = from or 1, to or #list
  local out = {}
  for i = from, to, 4000 do
    local r = redis.call(cmd, key, unpack(list, i, math.min(i + 3999, to)))
    if type(r) == 'table' then
      for _, v in ipairs(r) do
        out[#out + 1] = v
      end
    end
  end
  return out
end
