-- The type matrix, Lua -> Python -> R -> Lua (issue 18, acceptance 2): every wire type and every
-- documented mapping of a Lua host's values, sent to a Python worker that passes each on to an R
-- pool of its own (started inside the worker once: a nested pool across languages, item 9; the
-- worker's code is tests/matrix/matrix_relay.py), R answering through Python back to Lua. Each
-- value has one expected outcome: "exact" (deep equality: integer and float apart, float bits,
-- key order, array type, kind, shape, order and bits), the documented change (the value that comes
-- back is given), or a refusal whose message names the path. docs/wire-format.md's "What crosses:
-- the type matrix" (Lua -> Python -> R -> Lua) is this file's table.
local suiro = require "suiro"

local ROUTE = "Lua → Python → R → Lua"
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "tests/lua"
local root = here:gsub("/?tests/lua$", "")
if root == "" then root = "." end
if root:sub(1, 1) ~= "/" then root = assert(os.getenv("PWD")) .. "/" .. root end

local EXACT = { kind = "exact" }
local function changed(value, note) return { kind = "changed", value = value, note = note } end
local function refused(pattern, note) return { kind = "refused", pattern = pattern, note = note } end

local function bits(u) return (string.unpack("<d", string.pack("<I8", u))) end
local NA_REAL = bits(0x7FF00000000007A2)
local BIG = 40000 -- elements: 320 KB of f64, above the 256 KiB channel floor and the 32 KiB pool floor

local function fill(kind, n, f)
  local a = suiro.array(kind, n)
  for i = 1, n do a[i] = f(i) end
  return a
end

local function nest(depth)
  local v = 1
  for _ = 1, depth do v = { v } end
  return v
end

local function values()
  local V = {}
  local function add(name, cls, value, outcome)
    V[#V + 1] = { name = name, cls = cls, value = value, outcome = outcome or EXACT }
  end
  local big_f64 = fill("f64", BIG, function(i) return i / 3 end)
  local shared = { 1, 2 }
  local cyclic = { 1 }
  cyclic[2] = cyclic

  -- nil, booleans
  add("nil", "nil", nil)
  add("true", "boolean", true)
  add("false", "boolean", false)
  add("suiro.NA", "bool NA", suiro.NA)
  -- integers
  for _, v in ipairs { 0, 1, -1, 42, 2147483647, -2147483647 } do add(("%d"):format(v), "integer (i32 range)", v) end
  for _, v in ipairs { -2147483648, 1 << 31, 1 << 40, -(1 << 47), (1 << 47) - 1, 1 << 53 } do
    add(("%d"):format(v), "integer (R double)", v, changed(v + 0.0, "a float (R keeps it as a double)"))
  end
  for _, v in ipairs { (1 << 53) + 1, -(1 << 53) - 1, math.maxinteger, math.mininteger + 1, math.mininteger } do
    add(("%d"):format(v), "integer (R integer64)", v)
  end
  -- floats
  for _, c in ipairs {
    { "0.0", 0.0 }, { "-0.0", -0.0 }, { "1.5", 1.5 }, { "2.0", 2.0 }, { "-1e300", -1e300 },
    { "5e-324 (subnormal)", 5e-324 }, { "2.225e-308 (subnormal)", 2.225073858507201e-308 },
    { "1.7976931348623157e308", 1.7976931348623157e308 }, { "inf", math.huge }, { "-inf", -math.huge },
    { "nan", bits(0x7FF8000000000000) }, { "R's NA_real_", NA_REAL },
    { "NaN payload 0x7ff8dead", bits(0x7FF800000000DEAD) },
    { "negative NaN", bits(0xFFF8000000000000) },
  } do
    add("float " .. c[1], "float", c[2])
  end
  -- strings, bytes
  add('""', "string", "")
  add('"abc"', "string", "abc")
  add('"héllo"', "string", "héllo")
  add('"日本語"', "string", "日本語")
  add('"a\\nb"', "string", "a\nb")
  add("1 MB", "string", ("x"):rep(1 << 20))
  add("300 KB non-ASCII", "string", ("é"):rep(150000))
  -- refused by the R worker's decoder (the senders let it through), naming the argument
  add('"a\\0b"', "string", "a\0b",
    refused("cannot decode the task: argument 1: a string holds a NUL byte", "refused by the R worker: a NUL byte"))
  add('"\\xff\\xfe" (not UTF-8)', "string", "\xff\xfe")
  add('suiro.bytes ""', "bytes", suiro.bytes(""))
  add('suiro.bytes "\\0\\1\\255"', "bytes", suiro.bytes("\0\1\255"))
  add("suiro.bytes 300 KB", "bytes", suiro.bytes(("\0\1\2\255"):rep(75000)),
    changed(fill("u8", 300000, function(i) return ({ 0, 1, 2, 255 })[(i - 1) % 4 + 1] end),
      "a u8 array (R raw from 32 KiB goes as u8)"))
  -- lists and records
  add("{}", "table", {})
  add("{ 1, 2, 3 }", "list", { 1, 2, 3 })
  add('{ 1, "a", true, 2.5 }', "list", { 1, "a", true, 2.5 })
  add("table.pack(1, nil, 3) (a hole)", "list with n", table.pack(1, nil, 3))
  add("{ { 1, { 2, { 3 } } }, { a = {} } }", "nested", { { 1, { 2, { 3 } } }, { a = {} } })
  add("nested 40 deep", "nested", nest(40))
  add("nested 70 deep", "nested", nest(70),
    refused("argument 1%[1%][%[%]1]+%.%.%.%[1%]%[1%]%[1%]%[1%]: nested more than 64 levels deep",
      "refused: deeper than 64"))
  add("{ a = 1, b = \"x\" }", "record", { a = 1, b = "x" })
  add("suiro.dict { b, a } (order)", "record", suiro.dict { { "b", 1 }, { "a", 2 } })
  add("suiro.dict with a nil value", "record", suiro.dict { { "a", 1 }, { "note" } })
  add("{ [\"\"] = 1, [\"x y\"] = 2 }", "record", { [""] = 1, ["x y"] = 2 })
  add("{ é = { deep = { 1, { k = false } } } }", "record", { ["é"] = { deep = { 1, { k = false } } } })
  add("{ 1, a = 2 } (mixed)", "table", { 1, a = 2 },
    refused("argument 1%[1%]%[1%]: table mixes list items %(1..1%) and string keys", "refused: a mixed table"))
  add("{ [1.5] = 1 } (a float key)", "table", { [1.5] = 1 },
    refused("argument 1%[1%]%[1%]: table with a key of type number %(1%.5%) cannot be sent", "refused: a float key"))
  add("a table shared twice", "shared", { shared, shared }, changed({ { 1, 2 }, { 1, 2 } }, "two copies"))
  add("a cyclic table", "cycle", cyclic,
    refused("cannot decode the task: argument 1%[%[2%]%]: the value contains itself %(a cycle%)",
      "refused by the R worker: a cycle"))
  -- typed arrays
  add("f64 { 1.5, -0.0, nan, inf }", "suiro.array f64", suiro.f64 { 1.5, -0.0, bits(0x7FF8000000000000), math.huge })
  add("f64 with R's NA and a payload", "suiro.array f64", suiro.f64 { NA_REAL, bits(0x7FF800000000DEAD), 5e-324 })
  add("f64 {}", "suiro.array f64", suiro.f64 {})
  add("f64 { 2.5 } (one element)", "suiro.array f64", suiro.f64 { 2.5 }, changed(2.5, "a float (length 1)"))
  add("f64 big (320 KB)", "suiro.array f64", big_f64)
  add("f32 { 1.5, 2.5 }", "suiro.array f32", suiro.f32 { 1.5, 2.5 },
    changed(suiro.f64 { 1.5, 2.5 }, "f64 (R has no f32)"))
  add("i64 { 1, maxinteger, mininteger }", "suiro.array i64", suiro.i64 { 1, math.maxinteger, math.mininteger })
  add("i64 big (320 KB)", "suiro.array i64", fill("i64", BIG, function(i) return i << 40 end))
  add("i32 { 1, -2, INT32_MIN }", "suiro.array i32", suiro.i32 { 1, -2, -2147483648 })
  add("i32 {}", "suiro.array i32", suiro.i32 {})
  add("i32 { 7 } (one element)", "suiro.array i32", suiro.i32 { 7 }, changed(7, "an integer (length 1)"))
  add("i32 big (320 KB)", "suiro.array i32", fill("i32", 2 * BIG, function(i) return i - BIG end))
  add("u8 { 0, 255 }", "suiro.array u8", suiro.u8 { 0, 255 }, changed(suiro.bytes("\0\255"), "suiro.bytes (R raw)"))
  add("u8 big (320 KB)", "suiro.array u8", fill("u8", 8 * BIG, function(i) return i % 256 end))
  add("bool { true, NA, false }", "suiro.array bool", suiro.bool { true, suiro.NA, false })
  add("bool big (320 KB)", "suiro.array bool", fill("bool", 8 * BIG, function(i) return i % 3 == 0 end))
  add("c128 { 1+2i, 0-1i }", "suiro.array c128", suiro.c128 { { 1, 2 }, { 0, -1 } })
  add("c128 big (320 KB)", "suiro.array c128", fill("c128", BIG // 2, function(i) return { i / 3, 1 } end))
  add("2-d f64, F order", "ndarray", suiro.f64 { 1, 2, 3, 4, 5, 6 }:reshape({ 2, 3 }, "F"))
  add("2-d f64, C order", "ndarray", suiro.f64 { 1, 2, 3, 4, 5, 6 }:reshape({ 2, 3 }, "C"),
    changed(suiro.f64 { 1, 4, 2, 5, 3, 6 }:reshape({ 2, 3 }, "F"), "the same matrix in F order"))
  add("3-d i32, F order", "ndarray", fill("i32", 24, function(i) return i end):reshape({ 2, 3, 4 }, "F"))
  add("2-d bool, F order", "ndarray", suiro.bool { true, false, false, true }:reshape({ 2, 2 }, "F"))
  add("2-d f64 big (320 KB), F order", "ndarray", big_f64:reshape({ 200, 200 }, "F"))
  add('suiro.strings { "a", NA, "" }', "strings", suiro.strings { "a", suiro.NA, "" })
  add("suiro.strings {}", "strings", suiro.strings {})
  add("suiro.range(1, 10)", "range", suiro.range(1, 10),
    changed(fill("i32", 10, function(i) return i end), "an i32 array (R integers)"))
  -- dates, timestamps, factors
  add("date i32", "date", suiro.date { 0, 19723, -2147483648 })
  add("date f64", "date", suiro.date({ 19723.5, NA_REAL }, { type = "f64" }))
  add("date i64", "date", suiro.date({ 19723, math.mininteger }, { type = "i64" }),
    changed(suiro.date({ 19723, NA_REAL }, { type = "f64" }), "f64 days (R Date)"))
  add("timestamp f64 s UTC", "timestamp", suiro.timestamp({ 1704110400.5, NA_REAL },
    { type = "f64", unit = "s", tz = "UTC" }))
  add("timestamp f64 s Europe/Warsaw", "timestamp", suiro.timestamp({ 0.25 },
    { type = "f64", unit = "s", tz = "Europe/Warsaw" }))
  add("timestamp i64 ms UTC", "timestamp", suiro.timestamp({ 1704110400123 }, { unit = "ms", tz = "UTC" }))
  add("timestamp i64 s, no zone", "timestamp", suiro.timestamp({ 1704110400, -1 }, { unit = "s" }))
  add("timestamp i64 us with NA", "timestamp", suiro.timestamp({ 1704110400123456, math.mininteger },
    { unit = "us", tz = "Asia/Tokyo" }))
  add("timestamp i64 ns, whole microseconds", "timestamp", suiro.timestamp({ 1704110400123456000, -1000 },
    { unit = "ns", tz = "UTC" }))
  add("timestamp i64 ns with a sub-microsecond part", "timestamp",
    suiro.timestamp({ 1704110400123456789 }, { unit = "ns", tz = "UTC" }),
    refused("cannot decode the task: argument 1: timestamp 1 %(1704110400123456789 ns%) has a sub%-microsecond part",
      "refused by the R worker: a sub-microsecond part"))
  add("factor", "factor", suiro.factor({ "hi", "lo", suiro.NA }, { levels = { "lo", "hi" } }))
  add("factor ordered", "factor", suiro.factor({ "s", "l" }, { levels = { "s", "m", "l" }, ordered = true }))
  -- frames
  add("frame of every column kind", "frame", suiro.frame {
    { "f", suiro.f64 { 1.5, NA_REAL, -0.0 } }, { "i", suiro.i32 { 1, -2147483648, 3 } },
    { "b", suiro.bool { true, suiro.NA, false } }, { "s", suiro.strings { "x", suiro.NA, "é" } },
    { "k", suiro.factor({ "a", "b", suiro.NA }, { levels = { "a", "b" } }) },
    { "d", suiro.date({ 19723, NA_REAL, -1 }, { type = "f64" }) },
    { "t", suiro.timestamp({ 0, NA_REAL, 1.5 }, { type = "f64", unit = "s", tz = "UTC" }) },
    { "c", suiro.c128 { { 1, 2 }, { 3, 4 }, { 5, 6 } } } })
  add("frame, 0 rows", "frame", suiro.frame { { "x", suiro.f64 {} } })
  add("frame big (320 KB column)", "frame", suiro.frame { { "x", big_f64 } })
  -- call specs as values
  add("suiro.call by name", "call", suiro.call { "numpy.add", 1, k = 2.5 })
  add("suiro.call by source", "call", suiro.call { source = "x + 1", x = suiro.f64 { 1, 2 } })
  -- refused
  -- a Lua function inside the arguments goes to Python as a suiro.Func, which Python forwards
  add("a Lua function", "function", function() end,
    refused("cannot decode the task: argument 1: a lua function arrived %(only lua workers run lua functions%)",
      "refused by the R worker: a Lua function"))
  add("io.stdout", "userdata", io.stdout,
    refused("argument 1%[1%]%[1%]: userdata %(FILE%*%) cannot be sent", "refused: userdata"))
  add("a coroutine", "thread", coroutine.create(function() end),
    refused("argument 1%[1%]%[1%]: a coroutine cannot be sent", "refused: a coroutine"))
  add("a C function in a record", "record", { f = print },
    refused("cannot decode the task: argument 1%[%['f'%]%]: a lua function arrived",
      "refused by the R worker, naming the key"))
  return V
end

---------------------------------------------------------------------------------------------------
-- Deep, bit-exact comparison (as tests/lua/vectors_spec.lua's)

local function kind_of(v)
  local t = type(v)
  if t ~= "userdata" and t ~= "table" then return t end
  if rawequal(v, suiro.NA) then return "NA" end
  local mt = getmetatable(v)
  return type(mt) == "table" and mt.__name or t
end

local function same(x, y, path, seen)
  local kx, ky = kind_of(x), kind_of(y)
  if kx ~= ky then return false, ("%s: %s vs %s"):format(path, kx, ky) end
  if kx == "number" then
    if math.type(x) ~= math.type(y) then return false, path .. ": integer vs float" end
    if math.type(x) == "float" then
      if string.pack("<d", x) ~= string.pack("<d", y) then
        return false, ("%s: %s vs %s (bits differ)"):format(path, x, y)
      end
      return true
    end
    return x == y, ("%s: %d vs %d"):format(path, x, y)
  elseif kx == "string" or kx == "boolean" or kx == "nil" or kx == "NA" then
    return x == y, ("%s: %q vs %q"):format(path, tostring(x), tostring(y))
  elseif kx == "suiro.bytes" then
    return x == y and x:string() == y:string(), path .. ": bytes differ"
  elseif kx == "suiro.array" then
    local sx, sy = table.concat(x:shape(), "x"), table.concat(y:shape(), "x")
    local ok = x == y and x:kind() == y:kind() and x:type() == y:type() and x:order() == y:order() and sx == sy
    if ok and x:kind() == "timestamp" then ok = x:unit() == y:unit() and x:tz() == y:tz() end
    return ok, ("%s: %s %s vs %s %s"):format(path, tostring(x), sx, tostring(y), sy)
  end
  if seen[x] ~= nil then return seen[x] == y, path .. ": shared parts differ" end
  seen[x] = y
  if kx == "suiro.frame" then
    if x:nrow() ~= y:nrow() or x:ncol() ~= y:ncol() then return false, path .. ": frame sizes differ" end
    for i = 1, x:ncol() do
      if x:names()[i] ~= y:names()[i] then return false, path .. ": column names differ" end
      local ok, why = same(x:column(i), y:column(i), path .. "." .. x:names()[i], seen)
      if not ok then return false, why end
    end
    return true
  end
  if getmetatable(x) ~= getmetatable(y) then return false, path .. ": metatables differ" end
  for k, v in next, x do
    local ok, why = same(v, rawget(y, k), path .. "." .. tostring(k), seen)
    if not ok then return false, why end
  end
  for k in next, y do
    if rawget(x, k) == nil then return false, path .. ": extra key " .. tostring(k) end
  end
  if kx == "table" then
    local kx_, ky_ = suiro.keys(x), suiro.keys(y)
    if table.concat(kx_, ",") ~= table.concat(ky_, ",") then
      return false, ("%s: key order %s vs %s"):format(path, table.concat(kx_, ","), table.concat(ky_, ","))
    end
  end
  return true
end

local function outcome_text(o) return o.kind == "exact" and "exact" or o.note end

local function doc_rows()
  local f = assert(io.open(root .. "/docs/wire-format.md"))
  local text = f:read("a")
  f:close()
  local rows, inside = {}, false
  for line in text:gmatch("([^\n]*)\n") do
    if line == "### " .. ROUTE then
      inside = true
    elseif inside and line:sub(1, 1) == "#" then
      break
    elseif inside and line:sub(1, 2) == "| " and line:sub(1, 9) ~= "| value |" then
      local cells = {}
      for c in (line:sub(3, -3) .. " | "):gmatch("(.-) | ") do cells[#cells + 1] = (c:gsub("^`(.*)`$", "%1")) end
      rows[#rows + 1] = table.concat(cells, " | ")
    end
  end
  assert(inside, "docs/wire-format.md has no section '### " .. ROUTE .. "'")
  return rows
end

local function table_rows()
  local rows = {}
  for i, v in ipairs(values()) do rows[i] = v.name .. " | " .. v.cls .. " | " .. outcome_text(v.outcome) end
  return rows
end

local function markdown(rows)
  local out = { "| value | class | outcome |", "|---|---|---|" }
  for _, r in ipairs(rows) do
    local name, rest = r:match("^(.-) | (.*)$")
    out[#out + 1] = ("| `%s` | %s |"):format(name, rest)
  end
  return table.concat(out, "\n")
end

describe("the type matrix, Lua -> Python -> R -> Lua", function()
  local py
  setup(function()
    py = suiro.pool { workers = 1, timeout = "120s",
                      launcher = suiro.python { env = { PYTHONPATH = root .. "/tests/matrix" } } }
  end)
  teardown(function() if py then py:stop() end end)

  it("sends every value around with a pool inside the Python worker, as the table says", function()
    local vals = values()
    assert.is_true(#vals >= 100)
    local names, bad = {}, {}
    for _, v in ipairs(vals) do
      assert.is_nil(names[v.name], "value names repeat: " .. v.name)
      names[v.name] = true
      -- one value per task, in a one-element list (table.pack: nil too); the worker answers
      -- { { true, value } } or { { false, message } }
      local ok, res = pcall(function()
        return py:submit(suiro.call { "matrix_relay.to_r_all", table.pack(v.value) }):collect()
      end)
      local err, got
      if not ok then
        err = tostring(res)
      elseif res[1][1] == true then
        got = res[1][2]
      else
        err = res[1][2]
      end
      if err and os.getenv("SUIRO_MATRIX_SHOW") then print(v.name, err) end
      local o = v.outcome
      if o.kind == "refused" then
        if not err or not err:find(o.pattern) then
          bad[#bad + 1] = ("%s: expected a refusal matching %q, got %s"):format(v.name, o.pattern, err or tostring(got))
        end
      elseif err then
        bad[#bad + 1] = ("%s: %s"):format(v.name, err:sub(1, 300))
      else
        local want = o.value
        if o.kind == "exact" then want = v.value end
        local same_, why = same(want, got, "value", {})
        if not same_ then bad[#bad + 1] = ("%s: %s"):format(v.name, why) end
      end
    end
    assert(#bad == 0, ("%d of %d values:\n%s"):format(#bad, #vals, table.concat(bad, "\n")))
  end)

  it("is the table of docs/wire-format.md", function()
    local out = os.getenv("SUIRO_MATRIX_TABLE") -- tests/matrix/update-doc.py: write the table there
    if out then
      local f = assert(io.open(out, "w"))
      f:write(markdown(table_rows()), "\n")
      f:close()
    end
    local want, got = table_rows(), doc_rows()
    assert(table.concat(want, "\n") == table.concat(got, "\n"),
      "docs/wire-format.md, '### " .. ROUTE .. "' should read:\n" .. markdown(want))
  end)
end)
