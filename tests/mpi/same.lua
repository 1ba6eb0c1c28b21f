-- tests/mpi/same.lua: maps whose printed results must not depend on where they ran. The suite
-- runs it on a local pool, on an MPI pool without mpirun, and under mpirun -np 3 (and between two
-- network namespaces), and compares the outputs line by line.
--   suiro run tests/mpi/same.lua [local|mpi]
local suiro = require "suiro"

local backend = arg[1] or "mpi"
local pool <close> = suiro.pool { backend = backend, workers = 2 }
local range = suiro.range
local function map(f, xs, opts) return pool:map(f, xs, opts):collect() end

-- a hash of every bit of an array (f64 cells as their 64 bits)
local function bits(a)
  local h = 0
  for i = 1, #a do
    local v = a[i]
    local word = math.type(v) == "float" and string.unpack("<i8", string.pack("<d", v)) or v
    if type(v) == "boolean" then word = v and 1 or 0 end
    word = word ~ (word >> 33) ~ (word >> 50) -- fold the high bits (doubles keep theirs there)
    h = (h ~ word) * 0x100000001b3
  end
  return ("%016x"):format(h)
end

local function show(v)
  local t = type(v)
  if t == "table" then
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. show(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "userdata" then
    return tostring(v)
  elseif math.type(v) == "float" then
    return ("%.17g"):format(v)
  end
  return tostring(v)
end

local function failure(f, xs, opts)
  local ok, e = pcall(function() return pool:map(f, xs, opts):collect() end)
  if ok then return "no error" end
  if type(e) ~= "table" then return "error " .. tostring(e) end
  return ("%s index=%s %s"):format(e.class, tostring(e.index), (tostring(e.message):gsub("^.-:%d+: ", "")))
end

print("squares", bits(pool:map(function(x) return x * x end, suiro.range(1, 50000), { template = "f64" }):collect()))
print("step", bits(pool:map(function(x) return x end, suiro.range(1000, -2000, -3), { template = "i64" }):collect()))

-- seeds: the same draws whatever ran where
for _, seed in ipairs { 0, 1, 42, -5 } do
  local u = map(function() return suiro.random() end, range(1, 30000), { template = "f64", seed = seed })
  local k = map(function() return suiro.random(1, 1000000) end, range(1, 3000), { template = "i64", seed = seed })
  print("seed", seed, bits(u), bits(k))
end
local draws = map(function(i) return { i, suiro.random(6), suiro.random() } end, range(1, 700), { seed = 9 })
local dh = {}
for i = 1, #draws do dh[i] = draws[i][2] * 1e17 + draws[i][3] * 1e16 + draws[i][1] end
print("seeded tables", #draws, bits(dh))

-- templates
local rows = map(function(i) return { i, i * 0.5, -i } end, range(1, 4000), { template = "f64[3]" })
print("f64[3]", #rows, table.concat(rows:shape(), "x"), bits(rows))
local grid = map(function(i) return suiro.i32 { i, i + 1, i + 2, i + 3 } end, range(1, 500), { template = "i32[2,2]" })
print("i32[2,2]", table.concat(grid:shape(), "x"), bits(grid))
local rec = pool:map(function(i)
  return { a = i * 1.5, b = i % 100, c = i % 256, d = i % 3 == 0, e = i % 7 == 0 and suiro.NA or i }
end, suiro.range(1, 6000), { template = "{a: f32, b: i32, c: u8, d: bool, e: f64}" }):collect()
print("record", rec:nrow(), table.concat(rec:names(), ","), bits(rec.a), bits(rec.b), bits(rec.c), bits(rec.d),
  bits(rec.e))
for _, tpl in ipairs { "f32", "i32", "u8", "bool" } do
  local r = pool:map(function(i) if tpl == "bool" then return i % 2 == 0 end return i % 200 end, suiro.range(1, 2500),
    { template = tpl }):collect()
  print("template", tpl, r:type(), #r, bits(r))
end

-- inputs of every kind
print("f64 array", bits(map(function(x) return x / 3 end, suiro.f64 { 1, 2, 3, 4, 5, 6, 7 }, { template = "f64" })))
local big = suiro.array("i32", 20000)
for i = 1, #big do big[i] = i * 7 % 1000 end
print("i32 array", bits(pool:map(function(x) return x + 1 end, big, { template = "i64" }):collect()))
print("reference", bits(map("math.sqrt", range(1, 5000), { template = "f64" })))
local lookup = suiro.array("f64", 50000) -- captured by the function: a large value it carries
for i = 1, #lookup do lookup[i] = i * 0.25 end
print("captured", bits(map(function(i) return lookup[i] + lookup[#lookup - i + 1] end, range(1, 50000),
  { template = "f64" })))
print("ints", show(pool:map(function(x) return math.type(x) end, { 1, 2, 3 }):collect()))
print("floats", show(pool:map(function(x) return math.type(x) end, { 1.5, 2.5 }):collect()))
local words = {}
for i = 1, 3000 do words[i] = ("w%04d"):format(i) end
local up = pool:map(function(w) return w:upper() end, words):collect()
print("strings", #up, up[1], up[1777], up[3000])
local tabs = {}
for i = 1, 1500 do tabs[i] = { i = i, name = "n" .. i, sub = { i, i * 2 } } end
local back = pool:map(function(t) return t.sub[2] + #t.name end, tabs, { template = "i64" }):collect()
print("tables", bits(back))

-- untyped results: any value, holes, arrays (a large one crosses by reference on a host)
local mixed = pool:map(function(i)
  if i % 5 == 0 then return nil end
  if i % 5 == 1 then return "s" .. i end
  if i % 5 == 2 then return { i, { deep = i } } end
  if i % 5 == 3 then return suiro.f64 { i, -i } end
  return i % 2 == 0
end, suiro.range(1, 25)):collect()
local shown = {}
for i = 1, mixed.n or #mixed do shown[i] = show(mixed[i]) end
print("mixed", mixed.n, table.concat(shown, " "))
local arrays = pool:map(function(i) local a = suiro.array("f64", 40000) for k = 1, #a do a[k] = k * i end return a end,
  suiro.range(1, 6)):collect()
local sums = {}
for i = 1, #arrays do sums[i] = ("%.0f"):format(arrays[i]:sum()) end
print("large results", #arrays, table.concat(sums, " "))
local frames = pool:map(function(i) return suiro.frame { { "x", suiro.f64 { i, i + 1 } }, { "y", { "a", "b" } } } end,
  suiro.range(1, 4)):collect()
print("frames", #frames, frames[3]:nrow(), frames[3].x[2], frames[4].y[1])

-- failures name the element of the whole map
print("raise", failure(function(x) if x == 4321 then error("boom at " .. x) end return x end, range(1, 9000),
  { template = "f64" }))
print("cell", failure(function(x) return x == 6001 and 300 or 1 end, suiro.range(1, 8000), { template = "u8" }))
print("field", failure(function(x) return { a = x == 5555 and "no" or 1 } end, range(1, 7000),
  { template = "{a: f64}" }))
print("shape", failure(function(x) return x == 2500 and { 1, 2 } or { 1, 2, 3 } end, range(1, 3000),
  { template = "f64[3]" }))
print("untyped raise", failure(function(x) if x == 99 then error({ code = x }) end return x end, range(1, 200), {}))

-- nested maps (stay on the element's host)
local nested = pool:map(function(part)
  local inner = suiro.current_pool():map(function(x)
    local sq = suiro.current_pool():map(function(y) return y * y end, range(1, x % 7 + 1), { template = "f64" })
    return sq:collect():sum()
  end, part, { template = "f64" })
  return inner:collect():sum()
end, { range(1, 200), range(201, 400), range(401, 600), range(601, 800) }, { template = "f64" }):collect()
print("nested", bits(nested))

-- small and empty maps
print("empty", show(pool:map(function(x) return x end, suiro.range(1, 0), { template = "f64" }):collect():totable()))
print("one", show(pool:map(function(x) return x + 1 end, { 41 }):collect()))

-- streams hand out every element once
local seen, total = 0, 0
for i, v in pool:map(function(x) return 2 * x end, range(1, 12000), { template = "i64", stream = true }):results() do
  seen = seen + 1
  total = total + v - 2 * i
end
print("stream", seen, total)
local ordered = {}
for i, v in pool:map(function(x) return x % 10 end, range(1, 100), { template = "i64" }):results() do
  ordered[#ordered + 1] = i .. ":" .. v
end
print("results", #ordered, ordered[1], ordered[100])

-- tasks
local tasks = pool:submit_batch(function(a, b) return a * b, a + b end,
  { { 2, 3 }, { 4, 5 }, { 6, 7 }, { 8, 9 }, { 10, 11 } })
local firsts = pool:collect_all(tasks)
print("batch", table.concat(firsts, " "))
local t = pool:submit(function(s) return s:rep(3), #s end, "ab")
print("submit", t:collect())
local errs = pool:collect_all(pool:submit_batch(function(x) if x == 2 then error("two") end return x end,
  { { 1 }, { 2 }, { 3 } }), nil, { errors = "return" })
print("errors=return", show(errs[1]), errs[2].class, (errs[2].message:gsub("^.-:%d+: ", "")), show(errs[3]))
