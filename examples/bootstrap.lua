-- bootstrap.lua — a seeded bootstrap of the median: the same numbers whatever the worker count.
--
--   scripts/suiro run examples/bootstrap.lua
local suiro = require "suiro"

-- the sample: 200 values from a skewed distribution, made deterministic
local sample, x = {}, 12345
for i = 1, 200 do
  x = (x * 1103515245 + 12345) % 2147483648
  sample[i] = -math.log(1 - x / 2147483648) * 10
end
local data = suiro.f64(sample)

local function median_of_resample(_)
  local n = #data
  local r = {}
  for i = 1, n do r[i] = data[suiro.random(1, n)] end -- this element's own random stream
  table.sort(r)
  return (r[n // 2] + r[n // 2 + 1]) / 2
end

local results = {}
for _, workers in ipairs { 1, 2, 4 } do
  local pool <close> = suiro.pool { workers = workers }
  local t0 = suiro.now()
  local medians = pool:map(median_of_resample, suiro.range(1, 2000), { template = "f64", seed = 2026 }):collect()
  local sorted = medians:totable()
  table.sort(sorted)
  results[workers] = medians
  print(("%d worker(s): median %.4f, 95%% interval [%.4f, %.4f]  (%.0f ms)"):format(
    workers, sorted[1000], sorted[50], sorted[1950], (suiro.now() - t0) * 1e3))
end
print("bitwise identical across worker counts:", results[1] == results[2] and results[2] == results[4])
