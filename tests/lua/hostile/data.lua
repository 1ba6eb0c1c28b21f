-- Typed arrays, ranges, frames and maps over bad inputs and templates (docs/api.md "Typed
-- arrays", "Frames", "Maps"; issue 8 items 3, 7, 15, 16): sizes are checked before use, with a
-- clear error at the call; extreme ranges keep every element or are refused.
local H = require "tests.lua.hostile"
local V = require "tests.lua.hostile.values"

local cases = {}
local function add(c) c.deadline = c.deadline or 15; cases[#cases + 1] = c end

local GARBLE = { never = { "invalid option", "lua_pushfstring" } }

-- suiro.array(type, n) with counts that are not sizes
local bad_lengths = {
  { "-1", -1 }, { "1.5", 1.5 }, { "NaN", 0 / 0 }, { "math.huge", math.huge }, { "2^60", 2 ^ 60 },
  { "1 << 60", 1 << 60 }, { "2^53", 2 ^ 53 }, { "math.maxinteger", math.maxinteger }, { "math.mininteger", math.mininteger },
  { '"x"', "x" }, { "true", true },
}
for _, ty in ipairs { "f64", "i32", "u8", "bool", "c128" } do
  for _, l in ipairs(bad_lengths) do
    add {
      name = ("suiro.array(%q, %s) is refused with a clear message"):format(ty, l[1]),
      run = function(E) return E.suiro.array(ty, l[2]) end,
      expect = H.any_of(H.raises("suiro.array", GARBLE), H.raises("argument #2", GARBLE)),
    }
  end
end
for _, t in ipairs { { '"f65"', "f65" }, { '""', "" }, { "nil", nil }, { "1", 1 }, { '"F64"', "F64" }, { '"str"', "str" } } do
  add {
    name = ("suiro.array(%s, 3) is refused naming the type"):format(t[1]),
    run = function(E) return E.suiro.array(t[2], 3) end,
    expect = H.raises("suiro.array"),
  }
end
local bad_elems = {
  { "suiro.f64", { "a" } }, { "suiro.f64", { {} } }, { "suiro.f64", { true } }, { "suiro.f64", { print } },
  { "suiro.u8", { 300 } }, { "suiro.u8", { -1 } }, { "suiro.u8", { 1.5 } }, { "suiro.i32", { 2 ^ 31 } },
  { "suiro.i32", { 1.5 } }, { "suiro.i64", { 2 ^ 63 } }, { "suiro.i64", { 0.5 } },
  { "suiro.c128", { "x" } }, { "suiro.date", { "x" } }, { "suiro.u8", { 0 / 0 } },
}
for _, b in ipairs(bad_elems) do
  add {
    name = ("%s { %s } is refused naming the element"):format(b[1], tostring(b[2][1])),
    run = function(E) return E.suiro[b[1]:sub(7)](b[2]) end,
    expect = H.raises_any("suiro.", "element", "fit", "expected"),
  }
end
local array_misuse = {
  { "a[0] = 1", function(a) a[0] = 1 end, "range" },
  { "a[4] = 1 (length 3)", function(a) a[4] = 1 end, "range" },
  { "a[math.mininteger] = 1", function(a) a[math.mininteger] = 1 end, "range" },
  { 'a[1] = "x"', function(a) a[1] = "x" end, "" },
  { "a[1] = {}", function(a) a[1] = {} end, "" },
  { "a:reshape({2, 2}) of 3 elements", function(a) return a:reshape({ 2, 2 }) end, "reshape" },
  { "a:reshape({-1, -3})", function(a) return a:reshape({ -1, -3 }) end, "reshape" },
  { "a:reshape({1 << 32, 1 << 32})", function(a) return a:reshape({ 1 << 32, 1 << 32 }) end, "reshape" },
  { "a:reshape({2^62, 2^62, 0})", function(a) return a:reshape({ 1 << 62, 1 << 62, 0 }) end, "reshape" },
  { "a:reshape({1.5, 2})", function(a) return a:reshape({ 1.5, 2 }) end, "reshape" },
  { "a:reshape(3)", function(a) return a:reshape(3) end, "reshape" },
  { 'a:reshape({3}, "X")', function(a) return a:reshape({ 3 }, "X") end, "order" },
  { "a:reshape of 9 dimensions", function(a) return a:reshape({ 3, 1, 1, 1, 1, 1, 1, 1, 1 }) end, "dimension" },
  { 'a:slice("a", 2)', function(a) return a:slice("a", 2) end, "slice" },
  { "a + (array of 2)", function(a) return a + a:slice(1, 2) end, "same length" },
  { 'a + "x"', function(a) return a + "x" end, "'+'" },
  { "a * {}", function(a) return a * {} end, "'*'" },
  { "a .. a", function(a) return a .. a end, "" },
}
for _, m in ipairs(array_misuse) do
  add {
    name = ("suiro.f64 {1, 2, 3}: %s is refused"):format(m[1]),
    run = function(E) return m[2](E.suiro.f64 { 1, 2, 3 }) end,
    expect = H.raises(m[3], GARBLE),
  }
end
for _, s in ipairs {
  { "a[0]", function(a) return a[0] end, nil }, { "a[4]", function(a) return a[4] end, nil },
  { "a:slice(0, 10) (clamped)", function(a) return #a:slice(0, 10) end, 3 },
  { "a:slice(math.mininteger, math.maxinteger) (clamped)", function(a) return #a:slice(math.mininteger, math.maxinteger) end, 3 },
  { "a:slice(3, 1) (empty)", function(a) return #a:slice(3, 1) end, 0 },
} do
  add {
    name = ("suiro.f64 {1, 2, 3}: %s gives %s"):format(s[1], tostring(s[3])),
    run = function(E) return s[2](E.suiro.f64 { 1, 2, 3 }) end,
    expect = H.returns(s[3]),
  }
end
add {
  name = "writing to a received view writes its private copy, a:copy() is writable",
  run = function(E)
    local v = E.P:submit(function() return require("suiro").f64(10000) end):collect(10)
    local ok = pcall(function() v[1] = 1 end)
    local c = v:copy()
    c[1] = 2
    return ok, c[1], v[1]
  end,
  expect = H.returns(true, 2.0, 1.0),
}
for _, f in ipairs {
  { "suiro.timestamp({0}, { unit = \"weeks\" })", function(E) return E.suiro.timestamp({ 0 }, { unit = "weeks" }) end, "unit" },
  { "suiro.timestamp({0}, 5)", function(E) return E.suiro.timestamp({ 0 }, 5) end, "suiro.timestamp" },
  { "suiro.factor({\"a\"}, { levels = { \"a\", \"a\" } })", function(E)
    return E.suiro.factor({ "a" }, { levels = { "a", "a" } })
  end, "twice" },
  { "suiro.factor({\"z\"}, { levels = { \"a\" } })", function(E) return E.suiro.factor({ "z" }, { levels = { "a" } }) end, "levels" },
  { "suiro.factor({\"a\"}, { levels = { suiro.NA } })", function(E)
    return E.suiro.factor({ "a" }, { levels = { E.suiro.NA } })
  end, "suiro.factor" },
  { "suiro.factor({1}, {})", function(E) return E.suiro.factor({ 1 }, {}) end, "suiro.factor" },
  { "arithmetic on a factor", function(E) return E.suiro.factor({ "a" }, { levels = { "a" } }) + 1 end, "factor" },
  { "suiro.strings { 1 }", function(E) return E.suiro.strings { 1 } end, "suiro.strings" },
  { "suiro.bytes(5)", function(E) return E.suiro.bytes({}) end, "suiro.bytes" },
  { "suiro.dict { { 1, 2 } }", function(E) return E.suiro.dict { { 1, 2 } } end, "suiro.dict" },
  { "suiro.dict { { \"a\", 1 }, { \"a\", 2 } }", function(E) return E.suiro.dict { { "a", 1 }, { "a", 2 } } end, "twice" },
} do
  add { name = f[1] .. " is refused naming " .. f[3], run = f[2], expect = H.raises(f[3]) }
end

-- ranges with extreme integers: every element kept, or refused at the call (issue 8 item 3)
local ranges = {
  { "(math.mininteger, math.maxinteger)", { math.mininteger, math.maxinteger }, nil },
  { "(math.maxinteger, math.mininteger, -1)", { math.maxinteger, math.mininteger, -1 }, nil },
  { "(math.mininteger, math.maxinteger, 2)", { math.mininteger, math.maxinteger, 2 }, 1 << 63 },
  { "(1, math.maxinteger)", { 1, math.maxinteger }, math.maxinteger },
  { "(0, math.maxinteger, math.maxinteger)", { 0, math.maxinteger, math.maxinteger }, 2 },
  { "(math.mininteger, math.maxinteger, math.maxinteger)", { math.mininteger, math.maxinteger, math.maxinteger }, 3 },
  { "(math.maxinteger - 2, math.maxinteger)", { math.maxinteger - 2, math.maxinteger }, 3 },
  { "(math.mininteger, math.mininteger + 2)", { math.mininteger, math.mininteger + 2 }, 3 },
  { "(math.maxinteger, math.maxinteger - 2, -1)", { math.maxinteger, math.maxinteger - 2, -1 }, 3 },
  { "(0, 10, math.mininteger)", { 0, 10, math.mininteger }, 0 },
  { "(10, 0, math.mininteger)", { 10, 0, math.mininteger }, 1 },
  { "(5, 1)", { 5, 1 }, 0 },
}
for _, r in ipairs(ranges) do
  add {
    name = ("suiro.range%s: # and the last element are exact, or it is refused"):format(r[1]),
    run = function(E)
      local a, b, step = r[2][1], r[2][2], r[2][3]
      local ok, rg = pcall(E.suiro.range, a, b, step)
      if not ok then return "refused", tostring(rg):find("suiro.range", 1, true) ~= nil end
      local n = #rg
      if r[3] == nil then return "accepted with # = " .. tostring(n) end
      if math.ult(r[3] - 1, (1 << 63) - 1) and n ~= r[3] then return "wrong length " .. tostring(n) end
      if r[3] >= 1 and r[3] < (1 << 62) then
        local last = rg[r[3]]
        local want = a + (r[3] - 1) * (step or 1)
        if last ~= want then return "wrong last element " .. tostring(last) end
      end
      return "exact", true
    end,
    expect = r[3] == nil and H.returns("refused", true) or H.any_of(H.returns("exact", true), H.returns("refused", true)),
  }
end
for _, bad in ipairs {
  { "(1, 2, 0)", { 1, 2, 0 } }, { "(1.5, 2)", { 1.5, 2 } }, { "(1, 0/0)", { 1, 0 / 0 } }, { '("a", 2)', { "a", 2 } },
  { "(nil, 2)", { nil, 2 } }, { "(1, math.huge)", { 1, math.huge } }, { "(1, 2, 0.5)", { 1, 2, 0.5 } },
} do
  add {
    name = ("suiro.range%s is refused naming the argument"):format(bad[1]),
    run = function(E) return E.suiro.range(bad[2][1], bad[2][2], bad[2][3]) end,
    expect = H.raises("range"),
  }
end
for _, r in ipairs {
  { "suiro.range(1, math.maxinteger)", function(E) return E.suiro.range(1, math.maxinteger) end },
  { "suiro.range(1, 2^40)", function(E) return E.suiro.range(1, 1 << 40) end },
  { "suiro.range(math.mininteger, math.maxinteger)", function(E) return E.suiro.range(math.mininteger, math.maxinteger) end },
  { "suiro.range(0, math.maxinteger, 2^20)", function(E) return E.suiro.range(0, math.maxinteger, 1 << 20) end },
} do
  for _, tpl in ipairs { "none", "f64" } do
    add {
      name = ("pool:map over %s (template %s) is refused at the call with a clear error"):format(r[1], tpl),
      run = function(E)
        local ok, rg = pcall(r[2], E)
        if not ok then return "the range itself was refused" end
        local m = E.P:map(E.F.id, rg, tpl ~= "none" and { template = tpl } or nil)
        m:cancel()
        return "accepted " .. tostring(m)
      end,
      expect = H.any_of(H.raises("pool:map"), H.returns("the range itself was refused")), deadline = 20,
    }
  end
end
for _, r in ipairs {
  { "suiro.range(math.maxinteger - 2, math.maxinteger)", { math.maxinteger - 2, math.maxinteger },
    { math.maxinteger - 2, math.maxinteger - 1, math.maxinteger } },
  { "suiro.range(math.mininteger, math.mininteger + 4, 2)", { math.mininteger, math.mininteger + 4, 2 },
    { math.mininteger, math.mininteger + 2, math.mininteger + 4 } },
  { "suiro.range(math.maxinteger, math.maxinteger - 2, -1)", { math.maxinteger, math.maxinteger - 2, -1 },
    { math.maxinteger, math.maxinteger - 1, math.maxinteger - 2 } },
  { "suiro.range(0, math.maxinteger, math.maxinteger)", { 0, math.maxinteger, math.maxinteger }, { 0, math.maxinteger } },
} do
  add {
    name = ("pool:map over %s gives every element exactly"):format(r[1]),
    run = function(E)
      local t = E.P:map(E.F.id, E.suiro.range(r[2][1], r[2][2], r[2][3]), { template = "i64" }):collect(10)
      local out = {}
      for i = 1, #t do out[i] = t[i] end
      return out
    end,
    expect = H.returns(r[3]),
  }
  add {
    name = ("%s crosses to a worker as an argument and comes back equal"):format(r[1]),
    run = function(E)
      local rg = E.suiro.range(r[2][1], r[2][2], r[2][3])
      local back = E.P:submit(E.F.id, rg):collect(10)
      local out = {}
      for i = 1, #back do out[i] = back[i] end
      return out
    end,
    expect = H.returns(r[3]),
  }
end

-- maps over bad inputs
local bad_xs = {
  { "nil", function() return nil end, "argument 2" },
  { "5", function() return 5 end, "argument 2" },
  { '"x"', function() return "x" end, "argument 2" },
  { "io.stdout", function() return io.stdout end, "argument 2" },
  { "print", function() return print end, "argument 2" },
  { "a c128 array", function(E) return E.suiro.c128 { 1 } end, "c128" },
  { "a 2-d array", function(E) return E.suiro.f64({ 1, 2, 3, 4 }):reshape({ 2, 2 }) end, "1-d" },
  { "a table holding io.stdout", function() return { 1, io.stdout } end, "[2]" },
  { "a table holding a coroutine", function() return { coroutine.create(print) } end, "[1]" },
  { "a table mixing list and keys", function() return { 1, 2, x = 3 } end, "argument 2" },
  { "a table with n = 2^40", function() return { 1, n = 1 << 40 } end, "argument 2" },
}
for _, b in ipairs(bad_xs) do
  add {
    name = ("pool:map(f, %s) is refused naming %s"):format(b[1], b[3]),
    run = function(E) return E.P:map(E.F.id, b[2](E)) end,
    expect = H.raises("pool:map", b[3]),
  }
end
local bad_templates = {
  { '"f65"', "f65" }, { '""', "" }, { '"{"', "{" }, { '"{a: f64, a: f64}"', "{a: f64, a: f64}" }, { '"f64[0]"', "f64[0]" },
  { '"f64[-1]"', "f64[-1]" }, { '"f64[1099511627776]"', "f64[1099511627776]" }, { "5", 5 }, { "{}", {} }, { '"c128"', "c128" },
  { '"[f64]"', "[f64]" }, { '"{a: str}"', "{a: str}" }, { '"str"', "str" }, { '"f64[2][3][4][5][6][7][8][9][10]"', "f64[2][3][4][5][6][7][8][9][10]" },
  { '"{}"', "{}" }, { "a 33-field record", (function()
    local f = {}
    for i = 1, 33 do f[i] = "f" .. i .. ": f64" end
    return "{" .. table.concat(f, ", ") .. "}"
  end)() },
}
for _, t in ipairs(bad_templates) do
  add {
    name = ("pool:map with template %s is refused at the call naming the template"):format(t[1]),
    run = function(E) return E.P:map(E.F.id, { 1, 2 }, { template = t[2] }) end,
    expect = H.raises("template", GARBLE),
  }
end
local misfits = {
  { "u8", 300, "300" }, { "u8", -1, "-1" }, { "i32", 2 ^ 31, "2147483648" }, { "i32", 1.5, "1.5" },
  { "f64", "x", "string" }, { "bool", 1, "1" }, { "f64", {}, "table" }, { "i64", 2 ^ 63, "" },
}
for _, m in ipairs(misfits) do
  add {
    name = ("template %s with an element returning %s fails naming the element, and calls a number a number"):format(m[1], tostring(m[2])),
    run = function(E)
      local v = m[2]
      return E.P:map(function() return v end, { 1 }, { template = m[1] }):collect(10)
    end,
    expect = H.raises_obj { class = "remote", message = m[3], index = 1, never = type(m[2]) == "number" and { "string" } or nil },
  }
end
for _, c in ipairs {
  { "f64[3] with {1, 2}", "f64[3]", function() return { 1, 2 } end },
  { "f64[2] with {1, 2, 3}", "f64[2]", function() return { 1, 2, 3 } end },
  { "f64[2] with 5", "f64[2]", function() return 5 end },
  { "{mean: f64} with 5", "{mean: f64}", function() return 5 end },
  { "{mean: f64} with {sd = 1}", "{mean: f64}", function() return { sd = 1 } end },
  { "{mean: f64} with {mean = \"x\"}", "{mean: f64}", function() return { mean = "x" } end },
} do
  add {
    name = ("template %s fails the map naming element 1"):format(c[1]),
    run = function(E) return E.P:map(c[3], { 1 }, { template = c[2] }):collect(10) end,
    expect = H.raises_obj { class = "remote", index = 1, never = { "-7", "wants -" } },
  }
end
for _, o in ipairs {
  { "seed = 1.5", { seed = 1.5 }, "seed" }, { 'seed = "1"', { seed = "1" }, "seed" }, { "seed = math.huge", { seed = math.huge }, "seed" },
  { "seed = NaN", { seed = 0 / 0 }, "seed" }, { "seed = {}", { seed = {} }, "seed" },
  { 'progress = "yes"', { progress = "yes" }, "progress" }, { "progress = 1", { progress = 1 }, "progress" },
  { "tempalte = \"f64\"", { tempalte = "f64" }, "tempalte" }, { "[1] = true", { true }, "pool:map" },
} do
  add {
    name = ("pool:map with { %s } is refused naming %s"):format(o[1], o[3]),
    run = function(E) return E.P:map(E.F.id, { 1 }, o[2]) end,
    expect = H.raises(o[3]),
  }
end
add {
  name = 'pool:map(f, xs, "f64") (options not a table) is refused',
  run = function(E) return E.P:map(E.F.id, { 1 }, "f64") end,
  expect = H.raises("pool:map", "options"),
}
add {
  name = "a failing element: collect raises an error object with the 1-based index",
  run = function(E) return E.P:map(function(i) if i == 4 then error("four") end return i end, { 1, 2, 3, 4, 5 }):collect(10) end,
  expect = H.raises_obj { class = "remote", index = 4, message = "four" },
}
add {
  name = "a map over {} gives an empty table, with a template an empty array",
  run = function(E)
    return #E.P:map(E.F.id, {}):collect(5), #E.P:map(E.F.id, {}, { template = "f64" }):collect(5)
  end,
  expect = H.returns(0, 0),
}
for _, p in ipairs {
  { "a table", function() return { 1, 2 } end },
  { "an array of another type", function(E) return E.suiro.i32 { 1, 2 } end },
  { "an array of another length", function(E) return E.suiro.f64 { 1, 2, 3 } end },
  { "a range", function(E) return E.suiro.range(1, 2) end },
} do
  add {
    name = ("pm:run(%s) on a prepared map of f64 {1, 2} is refused"):format(p[1]),
    run = function(E)
      local pm = E.P:map_prepare(E.F.id, E.suiro.f64 { 1, 2 }, { template = "f64" })
      return pm:run(p[2](E))
    end,
    expect = H.raises("map:run"),
  }
end

-- frames
local bad_frames = {
  { "columns of different lengths", function(E) return E.suiro.frame { { "a", E.suiro.f64 { 1, 2 } }, { "b", E.suiro.f64 { 1 } } } end, { '"a"', '"b"' } },
  { "a name twice", function(E) return E.suiro.frame { { "a", E.suiro.f64 { 1 } }, { "a", E.suiro.f64 { 1 } } } end, { '"a"' } },
  { "a numeric name", function(E) return E.suiro.frame { { 5, E.suiro.f64 { 1 } } } end, { "name" } },
  { "a function column", function(E) return E.suiro.frame { { "a", print } } end, { '"a"' } },
  { "a 2-d column", function(E) return E.suiro.frame { { "a", E.suiro.f64({ 1, 2, 3, 4 }):reshape({ 2, 2 }) } } end, { '"a"' } },
  { "nrow = -1", function(E) return E.suiro.frame { nrow = -1 } end, { "nrow" } },
  { "nrow = 2^60", function(E) return E.suiro.frame { nrow = 1 << 60 } end, { "nrow" } },
  { "nrow = 1.5", function(E) return E.suiro.frame { nrow = 1.5 } end, { "nrow" } },
  { "nrow = 3 with a column of 2", function(E) return E.suiro.frame { { "a", E.suiro.f64 { 1, 2 } }, nrow = 3 } end, { "nrow" } },
  { "2 names for 1 column", function(E) return E.suiro.frame { names = { "a", "b" }, columns = { E.suiro.f64 { 1 } } } end, { "names" } },
  { "names, columns and another key", function(E)
    return E.suiro.frame { names = { "a" }, columns = { E.suiro.f64 { 1 } }, x = 1 }
  end, { "x" } },
  { "a column of tables", function(E) return E.suiro.frame { { "a", { {}, {} } } } end, { '"a"' } },
  { "a column mixing numbers and strings", function(E) return E.suiro.frame { { "a", { 1, "x" } } } end, { '"a"' } },
  { "a spec that is a number", function(E) return E.suiro.frame(5) end, { "suiro.frame" } },
}
for _, f in ipairs(bad_frames) do
  add {
    name = ("suiro.frame with %s is refused naming it"):format(f[1]),
    run = f[2],
    expect = H.raises("suiro.frame", table.unpack(f[3])),
  }
end
for _, s in ipairs {
  { "f.x = column of the wrong length", function(f, E) f.x = E.suiro.f64 { 1, 2, 3 } end, '"x"' },
  { "f.x = print", function(f) f.x = print end, '"x"' },
  { "f[1] = column", function(f, E) f[1] = E.suiro.f64 { 1, 2 } end, "" },
} do
  add {
    name = ("a frame of 2 rows: %s is refused"):format(s[1]),
    run = function(E)
      local f = E.suiro.frame { { "a", E.suiro.f64 { 1, 2 } } }
      return s[2](f, E)
    end,
    expect = H.raises(s[3]),
  }
end
-- frames with columns at or above the zero-copy floor (issue 8 item 7)
for _, c in ipairs {
  { "f64", 4096 }, { "f64", 100000 }, { "i32", 8192 }, { "i64", 5000 }, { "u8", 40000 }, { "bool", 40000 },
} do
  add {
    name = ("a frame with a %s column of %d rows crosses to a worker and back unchanged"):format(c[1], c[2]),
    run = function(E)
      local col = E.suiro.array(c[1], c[2])
      for i = 1, c[2] do col[i] = c[1] == "bool" and (i % 3 == 0) or (i % 100) end
      local f = E.suiro.frame { { "x", col }, { "k", E.suiro.array("i32", c[2]) } }
      local back = E.P:submit(E.F.id, f):collect(10)
      return back:nrow(), back.x[c[2]] == col[c[2]], back.x[7] == col[7]
    end,
    expect = H.returns(c[2], true, true),
  }
end
add {
  name = "a worker returning a frame with an f64 column of 10000 rows",
  run = function(E)
    local f = E.P:submit(function()
      local suiro = require "suiro"
      local a = suiro.f64(10000)
      for i = 1, 10000 do a[i] = i end
      return suiro.frame { { "x", a } }
    end):collect(10)
    return f:nrow(), f.x[10000]
  end,
  expect = H.returns(10000, 10000.0),
}
add {
  name = "a record-template map of 5000 elements gives a frame of 5000 rows",
  run = function(E)
    local f = E.P:map(function(i) return { mean = i, n = i } end, E.suiro.range(1, 5000), { template = "{mean: f64, n: i64}" }):collect(20)
    return f:nrow(), f.mean[5000], f.n[1]
  end,
  expect = H.returns(5000, 5000.0, 1),
}

-- a few bad lengths through the array-taking helpers (not 2^31: that is a valid 16 GiB array)
for _, c in ipairs(V.bad_counts) do
  if not c[1]:find("2^31", 1, true) and c[1] ~= "{}" then
    add {
      name = ("suiro.f64(%s) is refused with a clear message"):format(c[1]),
      run = function(E) return E.suiro.f64(c[2]) end,
      expect = H.raises_any("suiro.", "bad argument"),
    }
  end
end

return cases
