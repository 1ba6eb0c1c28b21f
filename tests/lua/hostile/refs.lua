-- Forged region references (issue 8 item 4; docs/zero-copy.md; suiro_bind.h section 4): REF
-- items built with suiro.wire.ref naming real regions of this process, regions already mapped,
-- other processes' regions, files in /dev/shm that are not suiro's; sent to the host's decoder,
-- to workers, and back from workers. A reference is validated against the region as mapped,
-- accepted only from the pool family, and can release only what it added.
local H = require "tests.lua.hostile"

local cases = {}
local function add(c) c.deadline = c.deadline or 20; cases[#cases + 1] = c end

-- The region (of this process's family) whose first data word holds marker: read from the file
-- itself, not through the API under test.
local function region_holding(E, marker)
  local want = string.pack("<d", marker)
  for _, name in ipairs(E.regions()) do
    local f = io.open("/dev/shm" .. name, "rb")
    if f then
      local ok = f:seek("set", 64) and f:read(8) == want
      f:close()
      if ok then return name end
    end
  end
  error("no region holds the marker")
end

-- A big array in a region of this process (arrays are made in regions once the process has a
-- pool), and that region's name.
local function host_region(E, n)
  local _ = E.P
  n = n or 600000
  local a = E.suiro.f64(n)
  for i = 1, n do a[i] = i * 0.5 end
  local marker = math.random() + 12345
  a[1] = marker
  local ok, name = pcall(region_holding, E, marker)
  if not ok then -- made privately (no room in /dev/shm?): a send moves it into a region
    E.P:submit(function(x) return #x end, a):collect(10)
    name = region_holding(E, marker)
  end
  a[1] = 0.5
  return name, a
end

-- A view received from a worker, and the name of the worker region that holds it.
local function worker_region(E, n)
  n = n or 300000
  local marker = math.random() + 54321
  local v = E.P:submit(function(k, m)
    local a = require("suiro").f64(k)
    for i = 1, k do a[i] = i * 0.25 end
    a[1] = m
    return a
  end, n, marker):collect(10)
  return region_holding(E, marker), v, marker
end

local function ref(E, name, fields)
  local d = { name = name, type = "f64", offset = 64, length = 8 }
  for k, v in pairs(fields or {}) do d[k] = v end
  return E.suiro.wire.ref(d)
end

-- decodes a forged ref through suiro.wire.decode (no describe): a view or an error
local function forge(E, name, fields)
  return E.suiro.wire.decode(E.suiro.wire.encode(ref(E, name, fields)))
end

local refused = H.raises("cannot decode value")

local function family(E) return ("/suiro_%x_"):format(E.pid) end

-- references to a real region of this process
local host_cases = {
  { "the whole array, as it is", function(n) return { length = 8 * n } end, "view" },
  { "its first element", function() return { length = 8 } end, "view" },
  { "as i64 (another element type)", function(n) return { type = "i64", length = 8 * n } end, "view" },
  { "as u8 (odd size)", function() return { type = "u8", length = 13 } end, "view" },
  { "as a 2-d shape", function() return { length = 8 * 600, shape = { 20, 30 }, order = "F" } end, "view" },
  { "past the end of the mapping", function() return { length = 8 * (1 << 24) } end, "refused" },
  { "of 10^11 elements (by length)", function() return { length = 8 * 100000000000 } end, "refused" },
  { "of 10^11 elements (by shape)", function() return { length = 8 * 100000000000, shape = { 100000, 1000000 } } end, "refused" },
  { "at offset 0 (the header)", function() return { offset = 0 } end, "refused" },
  { "at offset 8 (inside the header)", function() return { offset = 8 } end, "refused" },
  { "at offset 2^40", function() return { offset = 1 << 40 } end, "refused" },
  { "at offset 2^48 - 8", function() return { offset = (1 << 48) - 8 } end, "refused" },
  { "of kind bytes", function() return { type = "bytes", length = 64 } end, "refused" },
  { "of kind wire", function() return { type = "wire", length = 64 } end, "refused" },
  { "with 9 extents", function() return { length = 8, shape = { 1, 1, 1, 1, 1, 1, 1, 1, 1 } } end, "refused" },
}
for _, c in ipairs(host_cases) do
  add {
    name = ("a forged ref to a region of this process, %s: %s"):format(c[1],
      c[3] == "view" and "a view, a private copy (a write leaves the region alone)" or "refused"),
    run = function(E)
      local name, a = host_region(E)
      local before = a[1]
      local v = forge(E, name, c[2](#a))
      local ok = pcall(function() v[1] = 99 end)
      return E.suiro.is_error(v) or (getmetatable(v) or {}).__name, ok and v[1] == 99, a[1] == before
    end,
    expect = c[3] == "view" and H.returns("suiro.array", true, true) or refused,
  }
end
add {
  name = "a forged ref of the whole array: the view reads the same elements",
  run = function(E)
    local name, a = host_region(E)
    local v = forge(E, name, { length = 8 * #a })
    return #v == #a, v:sum() == a:sum()
  end,
  expect = H.returns(true, true),
}

-- names that are not regions this process may open
local names = {
  { "a name of another pool family", function() return "/suiro_1_2_a3" end },
  { "a name of pid 1's family", function() return "/suiro_1_1_pool" end },
  { "a name of this family that does not exist", function(E) return family(E) .. "0_azzzz" end },
  { "a name with a path", function() return "/../../dev/shm/x" end },
  { "a name with a slash inside", function(E) return family(E) .. "0/a" end },
  { "a name without a leading slash", function(E) return family(E):sub(2) .. "0_a1" end },
  { "a name of 255 bytes", function() return "/" .. ("s"):rep(254) end },
  { "a name of a file that is not suiro's", function(E)
    local p = "/hostile_not_suiro_" .. E.pid
    local f = assert(io.open("/dev/shm" .. p, "wb"))
    f:write(("x"):rep(4096))
    f:close()
    return p
  end },
  { "a family name of a file holding garbage", function(E)
    local p = family(E) .. "0_zjunk"
    local f = assert(io.open("/dev/shm" .. p, "wb"))
    f:write(("\7"):rep(8192))
    f:close()
    return p
  end },
  { "a family name of a 16-byte file", function(E)
    local p = family(E) .. "0_ztiny"
    local f = assert(io.open("/dev/shm" .. p, "wb"))
    f:write(("\0"):rep(16))
    f:close()
    return p
  end },
  { "a family name of a file with a region header that claims 1 GiB", function(E)
    local p = family(E) .. "0_zliar"
    local f = assert(io.open("/dev/shm" .. p, "wb"))
    f:write(string.pack("<I8i8I8i4i4i8", 0x6e6f69676572756f, 1, 1 << 30, 1, 0, 0), ("\0"):rep(128 - 40))
    f:close()
    return p, { length = 1 << 20 }
  end },
  { "the pool's own region (the largest of the family)", function(E)
    local _ = E.P
    local best, size = nil, -1
    for _, name in ipairs(E.regions()) do
      local f = io.open("/dev/shm" .. name, "rb")
      local sz = f and f:seek("end") or -1
      if f then f:close() end
      if sz > size then best, size = name, sz end
    end
    return best
  end },
}
for _, n in ipairs(names) do
  add {
    name = ("a forged ref naming %s is refused"):format(n[1]),
    run = function(E)
      local name, fields = n[2](E)
      local ok, v = pcall(forge, E, name, fields)
      if name:find("hostile_not_suiro") or name:find("0_z") then os.remove("/dev/shm" .. name) end
      if ok then return v end
      error(v, 0)
    end,
    expect = refused,
  }
end
add {
  name = "a forged ref naming a region of another suiro process is refused (another family)",
  run = function(E)
    local out = os.tmpname()
    local script = E.file([[
      package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
      local suiro = require "suiro"
      local p <close> = suiro.pool { workers = 1 }
      local a = suiro.f64(500000)
      local f = io.popen("ls /dev/shm")
      local pid = io.open("/proc/self/stat"):read("a"):match("^(%d+)")
      local names = {}
      for n in f:lines() do if n:find(("^suiro_%x_"):format(tonumber(pid))) then names[#names + 1] = "/" .. n end end
      f:close()
      local o = io.open(arg[1], "w")
      o:write(table.concat(names, "\n"), "\n")
      o:close()
      local t0 = suiro.now()
      while suiro.now() - t0 < 4 and io.open(arg[1] .. ".done") == nil do os.execute("sleep 0.05") end
      a[1] = 1
    ]])
    local exe = os.getenv("SUIRO_WORKER_EXE") or "build/bin/suiro"
    os.execute(("timeout 10 %s run %s %s >/dev/null 2>&1 &"):format(exe, script, out))
    local found = {}
    local t0 = E.suiro.now()
    while #found == 0 and E.suiro.now() - t0 < 8 do
      local f = io.open(out)
      if f then
        for l in f:lines() do found[#found + 1] = l end
        f:close()
      end
      if #found == 0 then os.execute("sleep 0.05") end
    end
    local results = {}
    for _, name in ipairs(found) do
      local ok, e = pcall(forge, E, name, { length = 8 })
      results[#results + 1] = ok and "accepted " .. name or (tostring(e):find("another pool family", 1, true) and "refused" or e)
    end
    io.open(out .. ".done", "w"):close()
    os.remove(out)
    os.remove(out .. ".done")
    for _, r in ipairs(results) do if r ~= "refused" then return false, r end end
    return #results > 0, "no names"
  end,
  expect = H.passes(),
}

-- a region already mapped in this process (a view from a worker)
local mapped_cases = {
  { "past the end", function(n) return { length = 8 * n + (1 << 24) } end },
  { "of 10^11 elements", function() return { length = 8 * 100000000000 } end },
  { "at offset 2^40", function() return { offset = 1 << 40 } end },
}
for _, c in ipairs(mapped_cases) do
  add {
    name = ("a forged ref to a region this process already maps (a worker's view), %s: refused"):format(c[1]),
    run = function(E)
      local name, v = worker_region(E)
      return forge(E, name, c[2](#v)), v
    end,
    expect = refused,
  }
end
add {
  name = "forged refs to a held view's region, decoded and dropped 50 times, do not change the view",
  run = function(E)
    local name, v = worker_region(E, 300000)
    local sum = v:sum()
    for _ = 1, 50 do
      forge(E, name, { length = 8 * #v }) -- the view is garbage at once
      collectgarbage()
    end
    -- new arrays of the same size, made by the worker and dropped: a freed region would be reused
    for _ = 1, 6 do
      E.P:submit(function(k)
        local a = require("suiro").f64(k)
        for i = 1, k do a[i] = -1 end
        return a
      end, 300000):collect(10) -- dropped at once
      collectgarbage()
    end
    return v:sum() == sum and v[2] == 0.5 and v[#v] == #v * 0.25
  end,
  expect = H.returns(true), deadline = 30,
}
add {
  name = "forged refs to a host array's region, decoded and dropped 50 times, leave the array intact",
  run = function(E)
    local name, a = host_region(E)
    local sum = a:sum()
    for _ = 1, 50 do
      forge(E, name, { length = 8 * #a }) -- the view is garbage at once
      collectgarbage()
    end
    for _ = 1, 4 do
      local b = E.suiro.f64(#a)
      b[1] = -5
      b = nil -- luacheck: ignore 311
      collectgarbage()
    end
    return a:sum() == sum and a[1] == 0.5
  end,
  expect = H.returns(true),
}

-- forged refs crossing to workers and back
add {
  name = "a forged ref to a host region sent to a worker: the worker reads the same elements",
  run = function(E)
    local name, a = host_region(E)
    return E.P:submit(function(v) return v:sum() end, ref(E, name, { length = 8 * #a })):collect(10) == a:sum()
  end,
  expect = H.returns(true),
}
for _, c in ipairs {
  { "past the end", function(n) return { length = 8 * n + (1 << 24) } end },
  { "of another family", function() return { name = "/suiro_1_2_a3" } end },
  { "at offset 0", function() return { offset = 0 } end },
} do
  add {
    name = ("a forged ref %s sent to a worker fails that task (class remote) and the pool keeps serving"):format(c[1]),
    run = function(E)
      local name, a = host_region(E)
      local fields = c[2](#a)
      local ok, e = pcall(function()
        return E.P:submit(function(v) return #v end, ref(E, fields.name or name, fields)):collect(10)
      end)
      return ok, E.suiro.is_error(e) and e.class, E.P:submit(E.F.one):collect(10)
    end,
    expect = H.returns(false, "remote", 1),
  }
end
for _, c in ipairs {
  { "past the end of a host region", "past" },
  { "of 10^11 elements", "huge" },
  { "of another family", "other" },
} do
  add {
    name = ("a worker returning a forged ref %s: the host refuses it"):format(c[1]),
    run = function(E)
      local name, a = host_region(E)
      return E.P:submit(function(nm, n, how)
        local suiro = require "suiro"
        local d = { name = nm, type = "f64", offset = 64, length = 8 * n + (1 << 24) }
        if how == "huge" then d.length = 8 * 100000000000 end
        if how == "other" then d.name = "/suiro_1_2_a3" end
        return suiro.wire.ref(d)
      end, name, #a, c[2]):collect(10)
    end,
    expect = H.raises_any("cannot decode", "outside", "another pool family", "refused"),
  }
end
add {
  name = "a forged ref decoded with describe = true gives its fields back and re-encodes identically",
  run = function(E)
    local s = E.suiro.wire.encode(ref(E, "/suiro_1_2_a3", { length = 48, shape = { 2, 3 }, order = "F", flags = -1 }))
    local d = E.suiro.wire.decode(s, { describe = true })
    return d.name, d.type, d.order, d.length, d.shape[2], d.flags, E.suiro.wire.encode(d) == s
  end,
  expect = H.returns("/suiro_1_2_a3", "f64", "F", 48, 3, -1, true),
}

return cases
