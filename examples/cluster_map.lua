-- examples/cluster_map.lua: one script for one host or a cluster. Only the command changes:
--
--   scripts/suiro run examples/cluster_map.lua                          -- this host
--   mpirun --oversubscribe -np 3 build/bin/suiro run examples/cluster_map.lua   -- 3 hosts
--   build/bin/suiro run --hosts node1,node2 examples/cluster_map.lua    -- mpirun over nodes
--
-- Every map below is dealt out in ranges over the hosts (each runs its ranges on its own
-- workers) and gives the same results on any number of hosts: what it prints does not change.
local suiro = require "suiro"

local pool <close> = suiro.pool { backend = "mpi", workers = 2 }
local hosts = pool:status().hosts
io.stderr:write(("cluster_map: %d host%s (%s), 2 workers each\n"):format(#hosts, #hosts == 1 and "" or "s",
  table.concat((function()
    local names = {}
    for _, h in ipairs(hosts) do names[#names + 1] = h.host end
    return names
  end)(), ", ")))

-- 1. a typed template: 100000 squares into one f64 array
local sq = pool:map(function(x) return x * x end, suiro.range(1, 100000), { template = "f64" }):collect()
print(("squares: %d elements, sum %.0f, last %.0f"):format(#sq, sq:sum(), sq[#sq]))

-- 2. a seeded Monte Carlo estimate of pi: each element draws from its own stream, so the
--    estimate is bitwise the same whichever host ran which element
local hits = pool:map(function()
  local h = 0
  for _ = 1, 500 do
    local x, y = suiro.random(), suiro.random()
    if x * x + y * y <= 1 then h = h + 1 end
  end
  return h
end, suiro.range(1, 4000), { template = "i64", seed = 42 }):collect()
print(("pi ~ %.8f from %d seeded draws"):format(4 * hits:sum() / (4000 * 500), 4000 * 500 * 2))

-- 3. seeded floats, checked bit for bit: a hash of every element's 64 bits
local u = pool:map(function(i) return suiro.random() + i end, suiro.range(1, 20000),
  { template = "f64", seed = 7 }):collect()
local h = 0
for i = 1, #u do
  h = (h * 31 + string.unpack("<i8", string.pack("<d", u[i]))) & 0xffffffffffff
end
print(("seeded floats: hash %012x"):format(h))

-- 4. a record template: a frame with one column per field
local f = pool:map(function(i) return { i = i, root = math.sqrt(i), even = i % 2 == 0 } end,
  suiro.range(1, 1000), { template = "{i: i64, root: f64, even: bool}" }):collect()
local evens = 0
for k = 1, f:nrow() do if f.even[k] then evens = evens + 1 end end
print(("frame: %d rows, sum of roots %.6f, %d even"):format(f:nrow(), f.root:sum(), evens))

-- 5. no template: any value comes back, in input order
local words = pool:map(function(w) return { w:upper(), #w } end,
  { "suiro", "waterway", "host", "rank", "range", "worker", "pool", "map" }):collect()
local parts = {}
for k, v in ipairs(words) do parts[k] = v[1] .. "/" .. v[2] end
print("words: " .. table.concat(parts, " "))

-- 6. nested maps stay on the host running the element
local sums = pool:map(function(part)
  return suiro.current_pool():map(math.sqrt, part, { template = "f64" }):collect():sum()
end, { suiro.range(1, 25000), suiro.range(25001, 50000), suiro.range(50001, 75000) }, { template = "f64" }):collect()
print(("nested: %.4f %.4f %.4f"):format(sums[1], sums[2], sums[3]))

-- 7. a failing element fails the map and names its index
local ok, err = pcall(function()
  return pool:map(function(x)
    if x == 7777 then error("no luck with " .. x) end
    return x
  end, suiro.range(1, 10000), { template = "i64" }):collect()
end)
print(("error: ok=%s element=%s message=%s"):format(tostring(ok), tostring(err.index),
  (err.message:gsub("^.-:%d+: ", ""))))

-- 8. tasks go round the hosts; their results come back to this script
local tasks = pool:submit_batch(function(a, b) return a * b end, { { 6, 7 }, { 8, 9 }, { 10, 11 }, { 12, 13 } })
local products = pool:collect_all(tasks)
print("tasks: " .. table.concat(products, " "))
