-- Pool options, launchers, env and config scripts (issue 8 items 14, 15, 17; docs/api.md "Pools",
-- "Config scripts"): every bad value is refused with an error naming the key (at suiro.pool, or at
-- suiro.open naming the file, the pool and the key), and every documented spelling works.
local H = require "tests.lua.hostile"

local cases = {}
local function add(c) cases[#cases + 1] = c end

local function value(src) return assert(load("return " .. src, "=value", "t", _G))() end

-- key, Lua source of a bad value, and what the error must also contain (besides the key)
local bad = {
  { "workers", "-1" }, { "workers", "65" }, { "workers", "1.5" }, { "workers", "0/0" }, { "workers", "math.huge" },
  { "workers", "2^31" }, { "workers", "math.mininteger" }, { "workers", "math.maxinteger" }, { "workers", '"2"' },
  { "workers", "true" }, { "workers", "{}" }, { "workers", "print" },
  { "max_workers", "-1" }, { "max_workers", "0" }, { "max_workers", "65" }, { "max_workers", "1.5" },
  { "max_workers", '"x"' }, { "max_workers", "0/0" }, { "max_workers", "math.mininteger" }, { "max_workers", "{}" },
  { "ring_cap", "0" }, { "ring_cap", "1" }, { "ring_cap", "3" }, { "ring_cap", "2^21" }, { "ring_cap", "-1" },
  { "ring_cap", "1.5" }, { "ring_cap", '"big"' }, { "ring_cap", "0/0" }, { "ring_cap", "math.maxinteger" },
  { "slot_size", "63" }, { "slot_size", "100" }, { "slot_size", "-1" }, { "slot_size", '"1GiB"' },
  { "slot_size", '"garbage"' }, { "slot_size", '"512 B"' }, { "slot_size", '"64k"' }, { "slot_size", "true" },
  { "slot_size", "0/0" }, { "slot_size", "131072" }, { "slot_size", '"-512B"' }, { "slot_size", "1e300" },
  { "result_size", "63" }, { "result_size", "100" }, { "result_size", '"1GiB"' }, { "result_size", '"x"' },
  { "result_size", "-64" }, { "result_size", "{}" }, { "result_size", "0/0" },
  { "result_slots", "0" }, { "result_slots", "-1" }, { "result_slots", "2^22 + 1" }, { "result_slots", "1.5" },
  { "result_slots", '"10"' }, { "result_slots", "0/0" }, { "result_slots", "math.maxinteger" },
  { "respawn", '"yes"' }, { "respawn", "1" }, { "respawn", "0" }, { "respawn", "{}" }, { "respawn", '"true"' },
  { "respawn", "print" },
  { "name", "1" }, { "name", "{}" }, { "name", '""' }, { "name", "print" }, { "name", "true" },
  { "launcher", '"perl"' }, { "launcher", "1" }, { "launcher", "{}" }, { "launcher", "{ kind = 'cobol' }" },
  { "launcher", "true" }, { "launcher", "print" }, { "launcher", '"LUA"' },
  { "env", '"A=1"' }, { "env", "{ A = {} }" }, { "env", "{ A = print }" }, { "env", '{ A = "x\\0y" }' },
  { "env", '{ ["A=B"] = "1" }' }, { "env", '{ [""] = "1" }' }, { "env", '{ [1] = "x" }' },
  { "env", '{ ["A\\0B"] = "1" }' }, { "env", '{ ["1A"] = "1" }' }, { "env", '{ ["A B"] = "1" }' },
  { "env", "{ A = { B = 'c' } }" }, { "env", "{ A = coroutine.create(print) }" }, { "env", "{ A = io.stdout }" },
  { "env", "{ [true] = 'x' }" }, { "env", "5" },
}
for _, b in ipairs(bad) do
  local key, src = b[1], b[2]
  add {
    name = ("suiro.pool { %s = %s } is refused naming %s"):format(key, src, key),
    run = function(E) return E.pool { workers = 1, [key] = value(src) } end,
    expect = H.raises("suiro.pool", key), deadline = 5,
  }
  add {
    name = ("a config script with %s = %s is refused at suiro.open naming the file, the pool and %s"):format(key, src, key),
    run = function(E)
      local path = E.file(("return { ingest = { workers = 1, %s = %s } }"):format(key, src))
      local ok, e = pcall(E.suiro.open, path)
      if ok then return "suiro.open accepted it" end
      error((tostring(e):gsub(path:gsub("%p", "%%%0"), "<file>")), 0)
    end,
    expect = H.raises("<file>", 'pool "ingest"', key), deadline = 5,
  }
end

-- options that are not a table, unknown keys
for _, src in ipairs { '"x"', "1", "true", "print", "coroutine.create(print)" } do
  add {
    name = ("suiro.pool(%s) is refused: options must be a table"):format(src),
    run = function(E) return E.pool(value(src)) end,
    expect = H.raises("suiro.pool", "table"), deadline = 5,
  }
end
for _, k in ipairs { "wokers", "timeout_s", "Workers", "launcher_", "envs" } do
  add {
    name = ("suiro.pool { %s = 1 } is refused naming the key and the valid ones"):format(k),
    run = function(E) return E.pool { [k] = 1 } end,
    expect = H.raises("suiro.pool", k, "workers"), deadline = 5,
  }
end
for _, src in ipairs { "{ 1 }", "{ [true] = 1 }", "{ [1.5] = 1 }", "{ [print] = 1 }" } do
  add {
    name = ("suiro.pool(%s): a key that is not a name is refused"):format(src),
    run = function(E) return E.pool(value(src)) end,
    expect = H.raises("suiro.pool", "key"), deadline = 5,
  }
end

-- documented spellings that must work (issue 8 item 14: size options take size strings)
local good = {
  { "slot_size", '"512B"', 512 }, { "slot_size", '"4KiB"', 4096 }, { "slot_size", '"64KiB"', 65536 },
  { "result_size", '"4KiB"', 4096 }, { "result_size", '"512B"', 512 }, { "result_size", "4096.0", 4096 },
  { "ring_cap", "1024.0", 1024 }, { "workers", "2.0", 2 }, { "timeout", '"1m"', 60 },
  { "start_timeout", '"10s"', 10 },
}
for _, g in ipairs(good) do
  add {
    name = ("suiro.pool { %s = %s } starts and runs a task"):format(g[1], g[2]),
    run = function(E)
      local p = E.pool { workers = 1, [g[1]] = value(g[2]) }
      return p:submit(E.F.one):collect(10)
    end,
    expect = H.returns(1), deadline = 10,
  }
end
add {
  name = "suiro.pool { slot_size = \"512B\" } carries arguments bigger than a slot",
  run = function(E)
    local p = E.pool { workers = 1, slot_size = "512B", result_size = "512B" }
    local s = ("x"):rep(5000)
    return p:submit(function(x) return #x end, s):collect(10)
  end,
  expect = H.returns(5000), deadline = 10,
}
add {
  name = "suiro.pool { name = \"ingest\" }: the name is used (status().name or tostring) or refused as unknown",
  run = function(E)
    local ok, p = pcall(E.pool, { workers = 1, name = "ingest" })
    if not ok then return tostring(p):find("name", 1, true) ~= nil, p end
    local st = p:status()
    return (tostring(st.name):find("ingest", 1, true) or tostring(p):find("ingest", 1, true)) ~= nil,
      "name ignored: " .. tostring(st.name) .. " / " .. tostring(p)
  end,
  expect = H.passes(), deadline = 10,
}
add {
  name = "suiro.pool { workers = 2, max_workers = 1 } is refused naming max_workers",
  run = function(E) return E.pool { workers = 2, max_workers = 1 } end,
  expect = H.raises("suiro.pool", "max_workers"), deadline = 5,
}

-- env: what reaches the workers
local env_ok = {
  { '{ A = "x" }', "A", "x" }, { "{ A = 1.5 }", "A", "1.5" }, { "{ A = 42 }", "A", "42" },
  { "{ A = true }", "A", "true" }, { '{ A = "" }', "A", "" }, { '{ A = "é ü \\t" }', "A", "é ü \t" },
  { '{ A = "a=b=c" }', "A", "a=b=c" }, { '{ _X9 = "1" }', "_X9", "1" },
}
for _, c in ipairs(env_ok) do
  add {
    name = ("suiro.pool { env = %s }: the worker sees %s = %q"):format(c[1], c[2], c[3]),
    run = function(E)
      local p = E.pool { workers = 1, env = value(c[1]) }
      return p:submit(function(k) return os.getenv(k) end, c[2]):collect(10)
    end,
    expect = H.returns(c[3]), deadline = 10,
  }
end
add {
  name = "suiro.lua { env = ... } and the pool's env both reach the worker, the pool's winning",
  run = function(E)
    local p = E.pool { workers = 1, launcher = E.suiro.lua { env = { A = "l", B = "l" } }, env = { B = "p" } }
    return p:submit(function() return os.getenv("A"), os.getenv("B") end):collect(10)
  end,
  expect = H.returns("l", "p"), deadline = 10,
}
-- the host's SUIRO_* / LC_* variables stay out (the battery's children run with both set)
for _, k in ipairs { "SUIRO_HOSTILE_LEAK", "LC_HOSTILE_LEAK" } do
  add {
    name = ("the host's %s does not reach workers (issue 8 item 17)"):format(k),
    run = function(E)
      assert(os.getenv(k) == "1", "the harness sets " .. k)
      return E.P:submit(function(name) return os.getenv(name) end, k):collect(10)
    end,
    expect = H.returns(nil), deadline = 10,
  }
end
add {
  name = "an env value of 1 MiB: the worker sees it, or suiro.pool refuses naming env",
  run = function(E)
    local big = ("v"):rep(1 << 20)
    local ok, p = pcall(E.pool, { workers = 1, env = { BIG = big }, start_timeout = "5s" })
    if not ok then return tostring(p):find("env", 1, true) ~= nil, p end
    return p:submit(function() return #os.getenv("BIG") end):collect(10) == #big, "wrong length"
  end,
  expect = H.passes(), deadline = 15,
}

-- launchers
local launchers = {
  { "suiro.lua(5)", function(E) return E.suiro.lua(5) end, { "suiro.lua", "table" } },
  { "suiro.lua { bogus = 1 }", function(E) return E.suiro.lua { bogus = 1 } end, { "bogus" } },
  { "suiro.lua { exe = \"\" }", function(E) return E.suiro.lua { exe = "" } end, { "exe" } },
  { "suiro.lua { exe = 5 }", function(E) return E.suiro.lua { exe = 5 } end, { "exe" } },
  { "suiro.lua { argv = \"x\" }", function(E) return E.suiro.lua { argv = "x" } end, { "argv" } },
  { "suiro.lua { argv = { 1 } }", function(E) return E.suiro.lua { argv = { 1 } } end, { "argv[1]" } },
  { "suiro.lua { argv = { \"a\\0b\" } }", function(E) return E.suiro.lua { argv = { "a\0b" } } end, { "argv[1]" } },
  { "suiro.lua { argv = { x = \"a\" } }", function(E) return E.suiro.lua { argv = { x = "a" } } end, { "argv" } },
  { "suiro.lua { env = { A = {} } }", function(E) return E.suiro.lua { env = { A = {} } } end, { "env.A" } },
  { "suiro.python { exe = 5 }", function(E) return E.suiro.python { exe = 5 } end, { "suiro.python", "exe" } },
  { "suiro.python { bogus = 1 }", function(E) return E.suiro.python { bogus = 1 } end, { "bogus", "python" } },
  { "suiro.r { exe = 5 }", function(E) return E.suiro.r { exe = 5 } end, { "suiro.r", "exe" } },
  { "suiro.r { bogus = 1 }", function(E) return E.suiro.r { bogus = 1 } end, { "bogus", "valid keys" } },
  { "suiro.python { exe = \"/nonexistent/python\" }", function(E)
    return E.pool { launcher = E.suiro.python { exe = "/nonexistent/python" }, start_timeout = "3s" }
  end, { "suiro.pool", "/nonexistent/python" } },
  { "suiro.r { exe = \"/nonexistent/Rscript\" }", function(E)
    return E.pool { launcher = E.suiro.r { exe = "/nonexistent/Rscript" }, start_timeout = "3s" }
  end, { "suiro.pool", "/nonexistent/Rscript" } },
  { "suiro.lua { exe = \"/nonexistent/suiro\" }", function(E)
    return E.pool { launcher = E.suiro.lua { exe = "/nonexistent/suiro" }, start_timeout = "3s" }
  end, { "suiro.pool" } },
  { "suiro.lua { exe = \"/bin/true\" } (exits at once)", function(E)
    return E.pool { launcher = E.suiro.lua { exe = "/bin/true" }, start_timeout = "3s" }
  end, { "suiro.pool" } },
  { "suiro.lua { exe = \"/bin/sleep\", argv = { \"30\" } } (never attaches)", function(E)
    return E.pool { launcher = E.suiro.lua { exe = "/bin/sleep", argv = { "30" } }, start_timeout = "1s" }
  end, { "suiro.pool" } },
}
for _, l in ipairs(launchers) do
  add { name = l[1] .. " is refused with a clear error", run = l[2], expect = H.raises(table.unpack(l[3])), deadline = 10 }
end

-- config scripts that are broken as files
local scripts = {
  { "a missing file", nil, { "suiro.open", "<file>" } },
  { "a syntax error", "return {", { "suiro.open", "<file>" } },
  { "an error while it runs", "error('nope')", { "suiro.open", "nope" } },
  { "returning nil", "return nil", { "suiro.open", "<file>", "table" } },
  { "returning a number", "return 5", { "suiro.open", "<file>", "table" } },
  { "a pool that is a number", "return { ingest = 5 }", { "suiro.open", 'pool "ingest"', "table" } },
  { "a pool name that is a number", "return { { workers = 1 } }", { "suiro.open", "<file>", "name" } },
  { "a pool name that is a boolean", "return { [true] = { workers = 1 } }", { "suiro.open", "<file>", "name" } },
  { "an unknown key", "return { ingest = { wokers = 1 } }", { "suiro.open", 'pool "ingest"', "wokers" } },
  { "a bad duration", 'return { ingest = { timeout = "1m30" } }', { "suiro.open", 'pool "ingest"', "timeout", "1m30" } },
  { "a bad launcher", 'return { ingest = { launcher = suiro.lua { exe = 5 } } }', { "suiro.open", "exe" } },
}
for _, s in ipairs(scripts) do
  add {
    name = ("suiro.open of %s is refused at open"):format(s[1]),
    run = function(E)
      local path = s[2] and E.file(s[2]) or (os.tmpname() .. "-missing.lua")
      local ok, e = pcall(E.suiro.open, path)
      if ok then return "suiro.open accepted it" end
      error((tostring(e):gsub(path:gsub("%p", "%%%0"), "<file>")), 0)
    end,
    expect = H.raises(table.unpack(s[3])), deadline = 5,
  }
end
for _, src in ipairs { "nil", "5", "{}", "print" } do
  add {
    name = ("suiro.open(%s) is refused naming the argument"):format(src),
    run = function(E) return E.suiro.open(value(src)) end,
    expect = H.raises("suiro.open", "argument 1"), deadline = 5,
  }
end
add {
  name = "suiro.open: an unknown pool name raises naming it and the pools there are",
  run = function(E)
    local pools <close> = E.suiro.open(E.file("return { a = { workers = 1 }, b = { workers = 1 } }"))
    return pools.nope
  end,
  expect = H.raises('"nope"', "a, b"), deadline = 5,
}
add {
  name = "suiro.open: a pool is created on first use and runs tasks; closing stops it",
  run = function(E)
    local pools = E.suiro.open(E.file("return { a = { workers = 1, timeout = '10s' } }"))
    local v = pools.a:submit(E.F.one):collect()
    local p = pools.a
    getmetatable(pools).__close(pools)
    return v, tostring(p)
  end,
  expect = H.returns(1, "suiro.pool(stopped)"), deadline = 10,
}

return cases
