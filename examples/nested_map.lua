-- nested_map.lua — maps inside maps on the same pool: no deadlock, even with one worker.
--
--   scripts/suiro run examples/nested_map.lua
local suiro = require "suiro"

for _, workers in ipairs { 1, 2 } do
  local pool <close> = suiro.pool { workers = workers }
  local parts = {}
  for k = 0, 3 do parts[#parts + 1] = suiro.range(k * 25000 + 1, (k + 1) * 25000) end
  local t0 = suiro.now()
  local sums = pool:map(function(part)
    local inner = suiro.current_pool():map(math.sqrt, part, { template = "f64" })
    return inner:collect():sum()
  end, parts, { template = "f64" }):collect()
  local rounded = {}
  for i = 1, #sums do rounded[i] = ("%.0f"):format(sums[i]) end
  print(("%d worker(s): %s  (%.1f ms)"):format(workers, table.concat(rounded, " "), (suiro.now() - t0) * 1e3))
end
