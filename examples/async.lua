-- async.lua — many tasks in flight from coroutines, without blocking.
--
--   scripts/suiro run examples/async.lua
--
-- Inside suiro.run, task:await() yields; the scheduler sleeps on the pool's eventfd and resumes
-- each coroutine when its result lands.
local suiro = require "suiro"

local pool <close> = suiro.pool { workers = 2 }

local function work(ms, label)
  local t0 = os.clock()
  while (os.clock() - t0) * 1e3 < ms do end
  return label
end

local order = {}
local t0 = suiro.now()
suiro.run(function()
  for i, ms in ipairs { 60, 10, 30, 20 } do
    suiro.spawn(function()
      local label = pool:submit(work, ms, ("job %d (%d ms)"):format(i, ms)):await()
      order[#order + 1] = label
    end)
  end
end)
print(("4 jobs done in %.0f ms, in completion order:"):format((suiro.now() - t0) * 1e3))
for _, label in ipairs(order) do print("  " .. label) end

-- A pipeline of awaits: fan out, then combine.
local total = suiro.run(function()
  local parts = {}
  for i = 1, 8 do parts[i] = pool:submit(function(k) return k * k end, i) end
  local sum = 0
  for _, t in ipairs(parts) do sum = sum + t:await() end
  return sum
end)
print("sum of squares 1..8 =", total)
