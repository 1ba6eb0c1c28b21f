-- nested.lua — tasks that submit tasks to their own pool.
--
--   scripts/suiro run examples/nested.lua
--
-- A worker waiting on nested results runs them itself meanwhile, so this works with one worker.
local suiro = require "suiro"

local pool <close> = suiro.pool { workers = 1 }

-- A parallel merge sort: each task splits its input and sorts the halves as nested tasks.
local function psort(xs, cutoff)
  if #xs <= cutoff then
    table.sort(xs)
    return xs
  end
  local p = require("suiro").current_pool()
  local mid = #xs // 2
  local left = p:submit(psort, { table.unpack(xs, 1, mid) }, cutoff)
  local right = p:submit(psort, { table.unpack(xs, mid + 1) }, cutoff)
  local a, b = left:collect(), right:collect()
  local out, i, j = {}, 1, 1
  while i <= #a or j <= #b do
    if j > #b or (i <= #a and a[i] <= b[j]) then out[#out + 1] = a[i]; i = i + 1
    else out[#out + 1] = b[j]; j = j + 1 end
  end
  return out
end

local xs, seed = {}, 7
for i = 1, 5000 do
  seed = (seed * 48271) % 2147483647
  xs[i] = seed % 100000
end

local t0 = suiro.now()
local sorted = pool:submit(psort, xs, 500):collect()
for i = 2, #sorted do assert(sorted[i - 1] <= sorted[i]) end
print(("sorted %d numbers with nested tasks on 1 worker in %.1f ms"):format(#sorted, (suiro.now() - t0) * 1e3))
print("first and last:", sorted[1], sorted[#sorted])
print("tasks run:", pool:status().tasks)
