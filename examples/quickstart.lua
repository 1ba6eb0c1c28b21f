-- quickstart.lua — a small pipeline on Lua workers.
--
--   scripts/suiro run examples/quickstart.lua
--
-- Word statistics over a generated corpus: split the work in chunks, count in parallel,
-- merge, and show what the pool did.
local suiro = require "suiro"

local pool <close> = suiro.pool { workers = 2 }

-- 1. a trivial task
print("1 + 2 =", pool:submit(function(x, y) return x + y end, 1, 2):collect())

-- 2. a corpus, generated deterministically
local words = { "water", "way", "river", "canal", "lock", "weir", "stream", "flow", "bank", "ford" }
local lines = {}
local seed = 42
for i = 1, 20000 do
  local line = {}
  for _ = 1, 8 do
    seed = (seed * 1103515245 + 12345) % 2147483648
    line[#line + 1] = words[seed % #words + 1]
  end
  lines[i] = table.concat(line, " ")
end

-- 3. count words per chunk on the workers (the counting function is shipped with its upvalue)
local function count(chunk)
  local counts = {}
  for _, line in ipairs(chunk) do
    for w in line:gmatch("%a+") do counts[w] = (counts[w] or 0) + 1 end
  end
  return counts
end

local chunks, size = {}, 2500
for i = 1, #lines, size do
  chunks[#chunks + 1] = { table.unpack(lines, i, math.min(i + size - 1, #lines)) }
end

local t0 = suiro.now()
local args = {}
for i, c in ipairs(chunks) do args[i] = { c } end
local partial = pool:collect_all(pool:submit_batch(count, args))

-- 4. merge on the host
local total = {}
for _, counts in ipairs(partial) do
  for w, n in pairs(counts) do total[w] = (total[w] or 0) + n end
end
local sorted = {}
for w, n in pairs(total) do sorted[#sorted + 1] = { w, n } end
table.sort(sorted, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)

print(("counted %d lines in %d chunks in %.1f ms"):format(#lines, #chunks, (suiro.now() - t0) * 1e3))
for i = 1, 3 do print(("  %-8s %d"):format(sorted[i][1], sorted[i][2])) end

-- 5. errors come back as objects with the worker's traceback
local ok, err = pcall(function() return pool:submit(function() error("no such canal") end):collect() end)
print("error caught:", ok == false and err.class, err.message)

-- 6. what the pool did
local s = pool:status()
for _, w in ipairs(s.workers) do
  print(("worker %d (pid %d): %s, %d tasks"):format(w.slot, w.pid, w.state, w.tasks))
end
