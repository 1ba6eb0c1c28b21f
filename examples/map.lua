-- map.lua — parallel maps: templates, ranges, progress, streaming.
--
--   scripts/suiro run examples/map.lua
local suiro = require "suiro"

local pool <close> = suiro.pool { workers = 2 }

-- a typed result: a suiro.array of f64
local roots = pool:map(math.sqrt, suiro.range(1, 10), { template = "f64" }):collect()
print("square roots:", roots)

-- records: one column per field
local stats = pool:map(function(n)
  local s, s2 = 0, 0
  for i = 1, n do s = s + i; s2 = s2 + i * i end
  local mean = s / n
  return { mean = mean, sd = math.sqrt(s2 / n - mean * mean) }
end, { 10, 100, 1000 }, { template = "{mean: f64, sd: f64}" }):collect()
print("means:", stats.mean, "sds:", stats.sd)

-- a million elements, with a progress bar when stderr is a terminal
local t0 = suiro.now()
local big = pool:map(function(x) return x * x % 7 end, suiro.range(1, 1000000),
  { template = "i32", progress = true }):collect()
print(("1e6 elements in %.0f ms; sum of x^2 mod 7 = %d"):format((suiro.now() - t0) * 1e3, big:sum()))

-- streaming: results as they complete
local count = 0
for _, v in pool:map(function(x) return ("item %d"):format(x) end, suiro.range(1, 1000), { stream = true }):results() do
  count = count + (v:match("^item") and 1 or 0)
end
print("streamed", count, "results")

-- failures name the element
local ok, err = pcall(function()
  return pool:map(function(x) assert(x ~= 42, "42 is not allowed") return x end, suiro.range(1, 100),
    { template = "f64" }):collect()
end)
print("failed as expected:", not ok, "at element", err.index, err.message)
