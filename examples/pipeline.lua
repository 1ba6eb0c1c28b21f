-- pipeline.lua — a config-driven pipeline: pools come from examples/pools.lua.
--
--   scripts/suiro run examples/pipeline.lua
local suiro = require "suiro"

local dir = arg[0]:match("^(.*)/[^/]*$") or "."
local pools <close> = suiro.open(dir .. "/pools.lua")

-- stage 1 (pool "parse"): turn CSV lines into records
local lines = {}
for i = 1, 2000 do lines[i] = ("%d,%s,%d"):format(i, ("item%03d"):format(i % 250), (i * 37) % 101) end

local function parse_chunk(chunk)
  local out = {}
  for _, line in ipairs(chunk) do
    local id, name, value = line:match("^(%d+),([^,]+),(%d+)$")
    out[#out + 1] = { id = tonumber(id), name = name, value = tonumber(value) }
  end
  return out, os.getenv("PIPELINE_STAGE")
end

local args = {}
for i = 1, #lines, 250 do args[#args + 1] = { { table.unpack(lines, i, math.min(i + 249, #lines)) } } end
local parsed = pools.parse:collect_all(pools.parse:submit_batch(parse_chunk, args))

-- stage 2 (pool "score"): aggregate per name with a module function reference
local records = {}
for _, chunk in ipairs(parsed) do for _, r in ipairs(chunk) do records[#records + 1] = r end end
local best = pools.score:submit(function(rs)
  local by = {}
  for _, r in ipairs(rs) do by[r.name] = (by[r.name] or 0) + r.value end
  local name, score = nil, -1
  for n, v in pairs(by) do if v > score or (v == score and n < name) then name, score = n, v end end
  return name, score
end, records):collect()

print(("parsed %d records in %d chunks; best name: %s"):format(#records, #args, best))
print("stage env seen by the parse workers:", select(2, pools.parse:submit(parse_chunk, {}):collect()))
