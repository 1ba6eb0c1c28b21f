-- submit, submit_batch and what crosses (docs/api.md "What crosses", "Functions", "Errors";
-- issue 8 items 3, 15, 16): bad functions, arguments that cannot be sent (with their path),
-- closures, odd tables, deep and cyclic values, results that cannot come back, thrown values.
local H = require "tests.lua.hostile"
local V = require "tests.lua.hostile.values"

local cases = {}
local function add(c) c.deadline = c.deadline or 10; cases[#cases + 1] = c end

-- argument 1 that is not a function, a call spec or a well-formed reference
local bad_f = {
  { "nil", function() return nil end, { "argument 1" } },
  { "1", function() return 1 end, { "argument 1" } },
  { "true", function() return true end, { "argument 1" } },
  { "{}", function() return {} end, { "argument 1" } },
  { "io.stdout", function() return io.stdout end, { "argument 1" } },
  { "a coroutine", function() return coroutine.create(print) end, { "argument 1" } },
  { "suiro.f64 {1}", function(E) return E.suiro.f64 { 1 } end, { "argument 1" } },
  { "a pool", function(E) return E.P end, { "argument 1" } },
}
for _, s in ipairs { "", "a..b", "a.b.", "1abc", ".a", "a.", "a b", "a..", "::", "a.b c", "a\0b", "é.f" } do
  bad_f[#bad_f + 1] = { ("%q"):format(s), function() return s end, { "submit", (s:gsub("%z", "")) ~= s and "" or s } }
end
for _, b in ipairs(bad_f) do
  add {
    name = ("pool:submit(%s) is refused at submit"):format(b[1]),
    run = function(E) return E.P:submit(b[2](E)) end,
    expect = H.raises(table.unpack(b[3])),
  }
  add {
    name = ("pool:submit_batch(%s, {{1}}) is refused at submit"):format(b[1]),
    run = function(E) return E.P:submit_batch(b[2](E), { { 1 } }) end,
    expect = H.raises(table.unpack(b[3])),
  }
  local map_pats = { table.unpack(b[3]) }
  if map_pats[1] == "submit" then map_pats[1] = "pool:map" end
  add {
    name = ("pool:map(%s, {1}) is refused at the call"):format(b[1]),
    run = function(E) return E.P:map(b[2](E), { 1 }) end,
    expect = H.raises(table.unpack(map_pats)),
  }
end
add {
  name = 'pool:submit("string.rep", "ab", 3): a reference resolved by require',
  run = function(E) return E.P:submit("string.rep", "ab", 3):collect() end,
  expect = H.returns("ababab"),
}
add {
  name = 'pool:submit("nosuchmodule_x.fn"): the worker fails with class remote naming it',
  run = function(E) return E.P:submit("nosuchmodule_x.fn"):collect() end,
  expect = H.raises_obj { class = "remote", message = "nosuchmodule_x" },
}
add {
  name = "pool:submit() with no function is refused naming argument 1",
  run = function(E) return E.P.submit(E.P) end,
  expect = H.raises("argument 1"),
}

-- values that cannot be sent, at each kind of place; the error names the path and the kind
local places = {
  { "argument 2", function(x) return { x } end, "argument 2" },
  { "argument 4", function(x) return { 1, 2, x } end, "argument 4" },
  { "a record field", function(x) return { { conn = x } } end, "argument 2.conn" },
  { "a nested list", function(x) return { { 1, { 2, x } } } end, "argument 2[2][2]" },
  { "a record in a list", function(x) return { { { k = x } } } end, "argument 2[1].k" },
}
for _, u in ipairs(V.unsendable) do
  for _, pl in ipairs(places) do
    add {
      name = ("submit with %s as %s is refused naming %s"):format(u[1], pl[1], pl[3]),
      run = function(E)
        local args = pl[2](u[2](E))
        return E.P:submit(E.F.id, table.unpack(args, 1, 3))
      end,
      expect = H.raises("submit", pl[3], u[3]),
    }
  end
  add {
    name = ("submit_batch with %s in lists[2] is refused naming it"):format(u[1]),
    run = function(E) return E.P:submit_batch(E.F.id, { { 1 }, { u[2](E) } }) end,
    expect = H.raises("submit", "[2]", u[3]),
  }
  add {
    name = ("a closure capturing %s is refused naming the upvalue"):format(u[1]),
    run = function(E)
      local captured = u[2](E)
      return E.P:submit(function() return captured end)
    end,
    expect = H.raises("submit", "upvalue 'captured'", u[3]),
  }
  add {
    name = ("a closure capturing a table holding %s is refused naming the upvalue and the key"):format(u[1]),
    run = function(E)
      local state = { inner = u[2](E) }
      return E.P:submit(function() return state end)
    end,
    expect = H.raises("submit", "upvalue 'state'", "inner", u[3]),
  }
  add {
    name = ("a function returning %s fails with an error naming result 1"):format(u[1]),
    run = function(E)
      return E.P:submit(function(kind)
        if kind == "io.stdout" then return io.stdout end
        if kind == "a coroutine" then return coroutine.create(print) end
        if kind == "a pool" then return require("suiro").current_pool() end
        if kind == "a task" then return require("suiro").current_pool():submit(function() end) end
        return require("lpeg").P(1)
      end, u[1]):collect()
    end,
    expect = H.any_of(H.raises_obj { class = "remote", message = "result 1" }, H.raises("result 1")),
  }
end
add {
  name = "a closure capturing a closure capturing a coroutine is refused naming both upvalues",
  run = function(E)
    local co = coroutine.create(print)
    local function inner() return co end
    return E.P:submit(function() return inner() end)
  end,
  expect = H.raises("submit", "upvalue 'inner'", "upvalue 'co'", "coroutine"),
}
for _, w in ipairs {
  { "coroutine.wrap", function() return coroutine.wrap(function() end) end },
  { "string.gmatch's iterator", function() return string.gmatch("a", "a") end },
} do
  add {
    name = ("a closure capturing %s (a C function with no name) is refused naming the upvalue"):format(w[1]),
    run = function(E)
      local fn = w[2]()
      return E.P:submit(function() return fn end)
    end,
    expect = H.raises("submit", "upvalue 'fn'"),
  }
end

-- closures that cross
local closures = {
  { "numbers, strings, booleans", function()
    local a, b, c = 1.5, "s", true
    return function() return a, b, c end
  end, { 1.5, "s", true } },
  { "a table snapshot", function()
    local t = { 1, { k = "v" } }
    local f = function() return t[2].k end
    t[2].k = "v" -- taken at submit time
    return f
  end, { "v" } },
  { "a recursive local function", function()
    local function fib(n) return n < 2 and n or fib(n - 1) + fib(n - 2) end
    return function() return fib(15) end
  end, { 610 } },
  { "string.format (by name)", function()
    local fmt = string.format
    return function() return fmt("%03d", 7) end
  end, { "007" } },
  { "a function capturing a function capturing a table", function()
    local t = { x = 41 }
    local function g() return t.x + 1 end
    return function() return g() end
  end, { 42 } },
  { "a cyclic table", function()
    local t = {}
    t.self = t
    return function() return t.self.self == t end
  end, { true } },
  { "200 upvalues", function()
    local src = {}
    for i = 1, 200 do src[#src + 1] = ("local u%d = %d"):format(i, i) end
    local sum = {}
    for i = 1, 200 do sum[#sum + 1] = "u" .. i end
    src[#src + 1] = "return function() return " .. table.concat(sum, " + ") .. " end"
    return assert(load(table.concat(src, "\n")))()
  end, { 20100 } },
  { "a 1 MiB string", function()
    local s = ("z"):rep(1 << 20)
    return function() return #s end
  end, { 1 << 20 } },
  { "suiro.now (a C function of a loaded module)", function()
    local now = require("suiro").now
    return function() return math.type(now()) end
  end, { "float" } },
  { "a suiro.f64 array", function()
    local a = require("suiro").f64 { 1, 2, 3 }
    return function() return a:sum() end
  end, { 6.0 } },
}
for _, c in ipairs(closures) do
  add {
    name = ("a closure capturing %s crosses and runs"):format(c[1]),
    run = function(E) return E.P:submit(c[2]()):collect() end,
    expect = H.returns(table.unpack(c[3])),
  }
end
add {
  name = "globals set by one task do not leak into the next",
  run = function(E)
    E.P:submit(function() LEAKED_GLOBAL = 1 end):collect() -- luacheck: ignore 111
    local p = E.P
    local a = p:submit(function() return LEAKED_GLOBAL end):collect() -- luacheck: ignore 113
    return a
  end,
  expect = H.returns(nil),
}

-- tables that are neither lists nor records
local odd = {
  { "{[1]=1,[3]=3}", function() return { [1] = 1, [3] = 3 } end },
  { "{[1e15]=1}", function() return { [1e15] = 1 } end },
  { "{[0]=1}", function() return { [0] = 1 } end },
  { "{[-1]=1}", function() return { [-1] = 1 } end },
  { "{[1.5]=1}", function() return { [1.5] = 1 } end },
  { "{[2^53]=1}", function() return { [2 ^ 53] = 1 } end },
  { "{[math.maxinteger]=1}", function() return { [math.maxinteger] = 1 } end },
  { "{[math.mininteger]=1}", function() return { [math.mininteger] = 1 } end },
  { "{1, 2, x = 1}", function() return { 1, 2, x = 1 } end },
  { "{[true]=1}", function() return { [true] = 1 } end },
  { "{[{}]=1}", function() return { [{}] = 1 } end },
  { "{[print]=1}", function() return { [print] = 1 } end },
  { "{[io.stdout]=1}", function() return { [io.stdout] = 1 } end },
  { "{1, n = 2^40}", function() return { 1, n = 2 ^ 40 } end },
  { "{1, n = 1 << 40}", function() return { 1, n = 1 << 40 } end },
  { "{1, n = math.maxinteger}", function() return { 1, n = math.maxinteger } end },
  { "{1, 2, n = 1}", function() return { 1, 2, n = 1 } end },
  { "{1, n = 1.5}", function() return { 1, n = 1.5 } end },
  { "{1, n = \"3\"}", function() return { 1, n = "3" } end },
  { "{1, n = -1}", function() return { 1, n = -1 } end },
}
for _, o in ipairs(odd) do
  add {
    name = ("submit with %s is refused naming argument 2 (and no made-up string key)"):format(o[1]),
    run = function(E) return E.P:submit(E.F.id, o[2]()) end,
    expect = H.raises("submit", "argument 2", { never = { '"?"' } }),
  }
end
local lists = {
  { "table.pack(1, nil, 3)", function() return table.pack(1, nil, 3) end, { n = 3, [1] = 1, [3] = 3 } },
  { "table.pack()", function() return table.pack() end, {} },
  { "{n = 0}", function() return { n = 0 } end, {} },
  { "a list of 100000 integers", function()
    local t = {}
    for i = 1, 100000 do t[i] = i end
    return t
  end, nil },
  { "a record with 10000 keys", function()
    local t = {}
    for i = 1, 10000 do t["k" .. i] = i end
    return t
  end, nil },
  { "a string with NUL bytes", function() return "a\0b\0" end, "a\0b\0" },
  { "a 16 MiB string", function() return ("q"):rep(16 << 20) end, nil },
  { "math.mininteger", function() return math.mininteger end, math.mininteger },
  { "-0.0", function() return -0.0 end, -0.0 },
  { "NaN", function() return 0 / 0 end, 0 / 0 },
}
for _, l in ipairs(lists) do
  add {
    name = ("submit with %s sends it and it comes back equal"):format(l[1]),
    run = function(E)
      local x = l[2]()
      local y = E.P:submit(E.F.id, x):collect()
      if l[3] == nil then return H.deep_eq(H.normalise(x), H.normalise(y)) end
      return H.deep_eq(H.normalise(l[3]), H.normalise(y)) or H.normalise(y)
    end,
    expect = H.returns(true),
  }
end

-- nesting and cycles
local function nest(depth, kind)
  local t = {}
  local c = t
  for _ = 2, depth do
    local n = {}
    if kind == "dict" then c.k = n else c[1] = n end
    c = n
  end
  return t
end
for _, d in ipairs { 10, 50 } do
  for _, kind in ipairs { "list", "dict" } do
    add {
      name = ("a %s nested %d deep crosses both ways"):format(kind, d),
      run = function(E)
        local x = nest(d, kind)
        local y = E.P:submit(E.F.id, x):collect()
        return H.deep_eq(H.normalise(x), H.normalise(y))
      end,
      expect = H.returns(true),
    }
  end
end
for _, d in ipairs { 70, 1000, 100000 } do
  for _, kind in ipairs { "list", "dict" } do
    add {
      name = ("a %s nested %d deep is refused at submit naming the depth"):format(kind, d),
      run = function(E) return E.P:submit(E.F.id, nest(d, kind)) end,
      expect = H.raises("submit", "argument 2", "deep"),
    }
    add {
      name = ("a task returning a %s nested %d deep fails naming result 1 and the depth"):format(kind, d),
      run = function(E)
        return E.P:submit(function(n, k)
          local t = {}
          local c = t
          for _ = 2, n do
            local x = {}
            if k == "dict" then c.k = x else c[1] = x end
            c = x
          end
          return t
        end, d, kind):collect()
      end,
      expect = H.raises_obj { class = "remote", message = "deep" },
    }
  end
end
local cycles = {
  { "t.self = t", function()
    local t = {}
    t.self = t
    return t
  end, function(r) return r.self == r end },
  { "a.b = b, b.a = a", function()
    local a, b = {}, {}
    a.b, b.a = b, a
    return a
  end, function(r) return r.b.a == r end },
  { "a list holding itself twice", function()
    local t = {}
    t[1], t[2] = t, t
    return t
  end, function(r) return r[1] == r and r[2] == r end },
  { "a shared part {x, x}", function()
    local x = { 1 }
    return { x, x }
  end, function(r) return r[1] == r[2] and r[1][1] == 1 end },
}
for _, c in ipairs(cycles) do
  add {
    name = ("a cyclic value (%s) crosses as an argument and comes back with its sharing"):format(c[1]),
    run = function(E) return c[3](E.P:submit(E.F.id, c[2]()):collect()) end,
    expect = H.returns(true),
  }
end
add {
  name = "a cycle through 1000 tables (1000 levels on the wire) is refused at submit naming the depth",
  run = function(E)
    local first = {}
    local c = first
    for _ = 1, 999 do c.next = {}; c = c.next end
    c.next = first
    return E.P:submit(E.F.id, first)
  end,
  expect = H.raises("submit", "argument 2", "deep"),
}
add {
  name = "a task returning a cyclic table: the host gets the cycle",
  run = function(E)
    local r = E.P:submit(function()
      local t = {}
      t.self = t
      return t
    end):collect()
    return r.self == r
  end,
  expect = H.returns(true),
}

-- results
add {
  name = "a task returning a function: a function comes back, or a clear error saying functions cannot be returned",
  run = function(E)
    local f = E.P:submit(function() return function() return 1 end end):collect()
    return type(f)
  end,
  expect = H.any_of(H.returns("function"),
    H.raises("function", { never = { "cannot decode value", "none can run" } }),
    H.raises_obj { class = "remote", message = "function", never = { "cannot decode value", "none can run" } }),
}
add {
  name = "a task returning a table holding a function: it comes back, or a clear error naming result 1",
  run = function(E)
    local t = E.P:submit(function() return { f = function() end } end):collect()
    return type(t.f)
  end,
  expect = H.any_of(H.returns("function"), H.raises("result 1", { never = { "none can run" } }),
    H.raises_obj { class = "remote", message = "result 1" }),
}
for _, n in ipairs { 0, 1, 3, 255, 5000 } do
  add {
    name = ("a task returning %d values gives them all"):format(n),
    run = function(E)
      local r = table.pack(E.P:submit(function(k)
        local t = {}
        for i = 1, k do t[i] = i end
        return table.unpack(t, 1, k)
      end, n):collect())
      if r.n ~= n then return false, r.n end
      for i = 1, n do if r[i] ~= i then return false, i end end
      return true
    end,
    expect = H.returns(true),
  }
end
add {
  name = "a task returning 200000 values: a clear error, and the pool keeps serving",
  run = function(E)
    local ok, e = pcall(function() return E.P:submit(function() return table.unpack({}, 1, 200000) end):collect() end)
    local after = E.P:submit(E.F.one):collect()
    if ok then return "it returned" end
    return after, type(e) == "string" and e:find("values", 1, true) ~= nil
  end,
  expect = H.returns(1, true),
}
add {
  name = "a task returning nil, nil, 3 gives three values",
  run = function(E) return select("#", E.P:submit(function() return nil, nil, 3 end):collect()) end,
  expect = H.returns(3),
}
add {
  name = "a task returning a 32 MiB string gives it whole",
  run = function(E) return #E.P:submit(function() return ("r"):rep(32 << 20) end):collect() end,
  expect = H.returns(32 << 20), deadline = 20,
}

-- what tasks throw
local thrown = {
  { 'error("x")', function() error("x") end, { class = "remote", message = "x" } },
  { "error(42)", function() error(42) end, { class = "remote", message = "42" } },
  { "error(nil)", function() error(nil) end, { class = "remote" } },
  { "error(true)", function() error(true) end, { class = "remote" } },
  { "error with a __tostring table", function()
    error(setmetatable({}, { __tostring = function() return "custom message" end }))
  end, { class = "remote", message = "custom message" } },
  { "error(io.stdout)", function() error(io.stdout) end, { class = "remote" } },
  { "error(coroutine)", function() error(coroutine.create(print)) end, { class = "remote" } },
  { "error(function)", function() error(print) end, { class = "remote" } },
  { "error with NUL bytes", function() error("a\0b", 0) end, { class = "remote", message = "a\0b" } },
  { "error of 10 MiB", function() error(("m"):rep(10 << 20), 0) end, { class = "remote", message = "mmmm" } },
  { "a stack overflow", function()
    local function f() return 1 + f() end
    return f()
  end, { class = "remote", message = "stack overflow" } },
  { "string.rep beyond memory", function() return ("x"):rep(1 << 50) end, { class = "remote" } },
  { "error(suiro error object)", function()
    local suiro = require "suiro"
    local ok, e = pcall(function() return suiro.current_pool():submit(function() error("inner") end):collect() end)
    assert(not ok)
    error(e)
  end, { class = "remote", message = "inner" } },
}
for _, t in ipairs(thrown) do
  add {
    name = ("a task raising %s: collect raises an error object of class %s"):format(t[1], t[3].class),
    run = function(E) return E.P:submit(t[2]):collect() end,
    expect = H.raises_obj(t[3]), deadline = 20,
  }
end
add {
  name = "a task raising a table keeps the table (issue 8 item 16)",
  run = function(E)
    local ok, e = pcall(function() return E.P:submit(function() error({ code = 42, tag = "t" }) end):collect() end)
    if ok then return "it returned" end
    local function find(x, seen)
      if type(x) ~= "table" or seen[x] then return false end
      seen[x] = true
      if x.code == 42 and x.tag == "t" then return true end
      for _, v in pairs(x) do if find(v, seen) then return true end end
      return false
    end
    return E.suiro.is_error(e), find(e, {})
  end,
  expect = H.returns(true, true),
}
add {
  name = "a worker that exits: class worker_died with slot and pid, and a message that says died once",
  run = function(E)
    local p = E.pool { workers = 1, timeout = "10s" }
    local ok, e = pcall(function() return p:submit(function() os.exit(3) end):collect() end)
    if ok then return "it returned" end
    local _, n = tostring(e):gsub("died", "")
    return e.class, type(e.slot), type(e.pid), n
  end,
  expect = H.returns("worker_died", "number", "number", 1),
}
add {
  name = "after a worker exits the pool replaces it and serves the next task",
  run = function(E)
    local p = E.pool { workers = 1, timeout = "10s" }
    pcall(function() return p:submit(function() os.exit(3) end):collect() end)
    return p:submit(E.F.one):collect()
  end,
  expect = H.returns(1),
}

-- submit_batch misuse
local batches = {
  { "lists = nil", function() return nil end, { "submit_batch", "#2" } },
  { "lists = 5", function() return 5 end, { "submit_batch", "#2" } },
  { 'lists = "x"', function() return "x" end, { "submit_batch", "#2" } },
  { "lists = {1}", function() return { 1 } end, { "submit_batch", "lists[1]" } },
  { 'lists = {{1}, "x"}', function() return { { 1 }, "x" } end, { "submit_batch", "lists[2]" } },
  { "lists = {{1}, io.stdout}", function() return { { 1 }, io.stdout } end, { "submit_batch", "lists[2]" } },
  { "lists = {{1}, {io.stdout}}", function() return { { 1 }, { io.stdout } } end, { "submit_batch", "userdata" } },
  { "lists = {{1}, {x = 1}}", function() return { { 1 }, { x = 1 } } end, { "submit_batch", "lists[2]" } },
}
for _, b in ipairs(batches) do
  add {
    name = ("pool:submit_batch(f, %s) is refused naming it"):format(b[1]),
    run = function(E) return E.P:submit_batch(E.F.id, b[2]()) end,
    expect = b[3][2] == "#2" and H.any_of(H.raises("submit_batch", "#2"), H.raises("submit_batch", "argument 2"))
      or H.raises(table.unpack(b[3])),
  }
end
add {
  name = "pool:submit_batch(f, {}) gives an empty table",
  run = function(E) return #E.P:submit_batch(E.F.id, {}) end,
  expect = H.returns(0),
}
add {
  name = "a batch refused at lists[3] leaves no task behind (the pool's counts agree)",
  run = function(E)
    local p = E.pool { workers = 1 }
    pcall(p.submit_batch, p, E.F.id, { { 1 }, { 2 }, { io.stdout } })
    local st = p:status()
    return st.submitted - st.collected
  end,
  expect = H.returns(0),
}

return cases
