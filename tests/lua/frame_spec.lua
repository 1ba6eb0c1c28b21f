-- suiro.frame: data frames — construction, access, errors, and crossing to a worker and back.
local suiro = require "suiro"

local function sample()
  return suiro.frame {
    { "price", suiro.f64 { 1.5, 2.5, 4 } },
    { "name", suiro.strings { "a", "b", suiro.NA } },
    { "qty", { 1, 2, 3 } },
    { "ok", { true, suiro.NA, false } },
    { "day", suiro.date { 19723, 19724, 19725 } },
    { "when", suiro.timestamp({ 0, 1700000000000, 1 }, { unit = "ms", tz = "UTC" }) },
    { "size", suiro.factor({ "s", "l", "s" }, { levels = { "s", "m", "l" }, ordered = true }) },
  }
end

describe("suiro.frame", function()
  it("is built from { name, column } pairs and keeps the column order", function()
    local f = sample()
    assert.are.same({ "price", "name", "qty", "ok", "day", "when", "size" }, f:names())
    assert.are.equal(3, f:nrow())
    assert.are.equal(7, f:ncol())
    assert.are.equal(3, #f) -- # is the row count
    local seen = {}
    for name, col in pairs(f) do seen[#seen + 1] = name .. ":" .. #col end
    assert.are.same({ "price:3", "name:3", "qty:3", "ok:3", "day:3", "when:3", "size:3" }, seen)
    assert.are.equal(
      "suiro.frame(3 rows) {price f64, name strings, qty i64, ok bool, day date i32, when timestamp i64 ms UTC, " ..
      "size factor ordered}", tostring(f))
  end)

  it("gives columns by name, by position, and as the same objects", function()
    local f = sample()
    assert.are.equal(2.5, f.price[2])
    assert.are.equal(f.price, f["price"])
    assert.is_true(rawequal(f.price, f:column(1)))
    assert.is_true(rawequal(f.name, f:column("name")))
    assert.is_nil(f.nope)
    assert.is_nil(f:column(8))
    assert.are.equal(suiro.NA, f.name[3])
    assert.are.equal("l", f.size[2])
    assert.are.equal(suiro.NA, f.ok[2])
    assert.are.equal("UTC", f.when:tz())
  end)

  it("turns plain tables into typed columns", function()
    local f = suiro.frame {
      { "i", { 1, 2 } }, { "x", { 1, 2.5 } }, { "b", { true, false } }, { "s", { "a", suiro.NA } },
    }
    assert.are.equal("i64", f.i:type())
    assert.are.equal("f64", f.x:type())
    assert.are.equal("bool", f.b:type())
    assert.are.same({ "a", suiro.NA, n = 2 }, setmetatable(f.s, nil))
  end)

  it("also takes names and a table of columns by name", function()
    local f = suiro.frame({ "b", "a" }, { a = suiro.i32 { 1, 2 }, b = { "x", "y" } })
    assert.are.same({ "b", "a" }, f:names())
    assert.are.equal(2, f.a[2])
  end)

  it("has a row count without columns", function()
    assert.are.equal(3, #suiro.frame { nrow = 3 })
    assert.are.equal(0, #suiro.frame {})
    assert.are.equal(0, suiro.frame {}:ncol())
  end)

  it("adds, replaces and removes columns", function()
    local f = sample()
    f.total = f.price * 2
    assert.are.equal(8, f:ncol())
    assert.are.same({ 3, 5, 8 }, f.total:totable())
    f.total = suiro.f64 { 0, 0, 0 }
    assert.are.equal(8, f:ncol())
    assert.are.equal(0.0, f.total[3])
    f.name = nil
    assert.are.same({ "price", "qty", "ok", "day", "when", "size", "total" }, f:names())
    assert.is_nil(f.name)
    local g = suiro.frame {}
    g.x = { 1, 2 } -- the first column sets the row count
    assert.are.equal(2, #g)
  end)

  it("lets methods win over columns of the same name", function()
    local f = suiro.frame { { "names", { "a" } } }
    assert.are.equal("function", type(f.names))
    assert.are.same({ "names" }, f:names())
    assert.are.equal("a", f:column("names")[1])
  end)

  it("refuses bad columns, naming them", function()
    assert.has_error(function() suiro.frame { { "a", { 1, 2 } }, { "b", { 1 } } } end,
      'suiro.frame: column "b" has 1 row(s), column "a" has 2')
    assert.has_error(function() suiro.frame { { "a", { 1 } }, { "a", { 2 } } } end,
      'suiro.frame: column name "a" appears twice')
    assert.has_error(function() suiro.frame { { "a", { 1, "x" } } } end,
      'suiro.frame: column "a" mixes strings and numbers (element 2): give it as a typed array')
    assert.has_error(function() suiro.frame { { "a", {} } } end,
      'suiro.frame: cannot tell the type of column "a" (empty): give it as a typed array such as suiro.f64 {} or ' ..
      "suiro.strings {}")
    assert.has_error(function() suiro.frame { { "m", suiro.f64 { 1, 2, 3, 4 }:reshape { 2, 2 } } } end,
      'suiro.frame: column "m" is an n-d array; columns are 1-d')
    assert.has_error(function() suiro.frame { { "a", io.stdout } } end,
      'suiro.frame: column "a" must be a suiro.array, suiro.strings or a table of values, got FILE*')
    assert.has_error(function() suiro.frame { "a" } end,
      "suiro.frame: column 1 must be a { name, column } pair, got string")
    assert.has_error(function() suiro.frame { { 1, { 1 } } } end,
      "suiro.frame: column 1: the name must be a string, got number")
    assert.has_error(function() suiro.frame { nrow = 2, { "a", { 1 } } } end,
      'suiro.frame: column "a" has 1 row(s), nrow is 2')
    assert.has_error(function() suiro.frame { rows = 2 } end,
      "suiro.frame: unexpected key rows (give columns as { name, column } pairs, and nrow = N)")
    assert.has_error(function() suiro.frame({ "a" }, { b = { 1 } }) end, 'suiro.frame: no column "a" in argument 2')
    local f = sample()
    assert.has_error(function() f.extra = { 1, 2 } end, 'suiro.frame: column "extra" has 2 row(s), the frame has 3')
    assert.has_error(function() f[1] = { 1, 2, 3 } end, "suiro.frame: column names are strings, got number")
  end)

  it("crosses to a worker and back unchanged", function()
    local pool <close> = suiro.pool { workers = 1 }
    local frame = sample()
    local back = pool:submit(function(f) return f end, frame):collect()
    assert.are.equal(suiro.wire.encode(frame), suiro.wire.encode(back))
    assert.are.same(frame:names(), back:names())
    -- the worker sees a frame too
    local nrow, total, size, tz = pool:submit(function(f)
      return f:nrow(), f.price:sum(), f.size[2], f.when:tz()
    end, frame):collect()
    assert.are.equal(3, nrow)
    assert.are.equal(8.0, total)
    assert.are.equal("l", size)
    assert.are.equal("UTC", tz)
    -- and can build one
    local made = pool:submit(function()
      local s = require "suiro"
      return { s.frame { { "x", { 1.5 } } } }
    end):collect()
    assert.are.equal(1.5, made[1].x[1])
  end)
end)

-- The examples of docs/api.md ("What crosses", "Frames", "suiro.wire", "Typed arrays"), as written there.
describe("docs/api.md examples", function()
  it("records", function()
    local r = suiro.dict { { "name", "ada" }, { "age", 36 }, { "note" } } -- "note" is sent as nil
    assert.are.same({ "name", "age", "note" }, suiro.keys(r))
    assert.are.same({ "a", "b" }, suiro.keys(suiro.wire.decode(suiro.wire.encode { b = 1, a = 1 })))
    local r2 = suiro.wire.decode(suiro.wire.encode(r))
    assert.are.same({ "name", "age", "note" }, suiro.keys(r2))
    assert.is_nil(r2.note)
  end)

  it("NA", function()
    assert.are.equal("NA", tostring(suiro.NA))
    assert.is_truthy(suiro.NA)
    assert.are.equal(suiro.NA, suiro.wire.decode(suiro.wire.encode(suiro.NA)))
    assert.are.equal(-2147483648, suiro.wire.decode(suiro.wire.encode(suiro.i32 { suiro.NA }))[1])
    assert.are.equal(suiro.NA, suiro.strings { "a", suiro.NA }[2])
  end)

  it("dates, timestamps, factors", function()
    local day = suiro.date { 0, 19723 }                 -- i32 days; { type = "f64" } or "i64" too
    local at = suiro.timestamp({ 1700000000000 }, { unit = "ms", tz = "UTC" })  -- i64 by default
    local size = suiro.factor({ "s", "l", suiro.NA }, { levels = { "s", "m", "l" }, ordered = true })
    assert.are.equal("l", size[2])
    assert.are.equal(2, size:codes()[2])
    assert.are.same({ "s", "m", "l" }, size:levels())
    assert.are.equal("date", day:kind())
    assert.are.equal("i32", day:type())
    assert.are.equal("i64", at:type())
    assert.are.equal("ms", at:unit())
    assert.are.equal("UTC", at:tz())
    assert.are.equal("timestamp", at:kind())
    assert.is_true(size:ordered())
    assert.has_error(function() return size * 2 end)
  end)

  it("frames", function()
    local f = suiro.frame {
      { "price", suiro.f64 { 1.5, 2.5, 4 } },
      { "name", { "a", "b", suiro.NA } },   -- plain tables become columns: strings,
      { "qty", { 1, 2, 3 } },               -- integers (i64), floats (f64) or booleans
    }
    assert.are.equal(2.5, f.price[2])
    assert.are.equal(3, f["qty"][3])
    assert.are.same({ "price", "name", "qty" }, f:names())
    assert.are.equal(3, f:nrow())
    assert.are.equal(3, f:ncol())
    assert.are.equal(3, #f)
    local order = {}
    for name in pairs(f) do order[#order + 1] = name end
    assert.are.same({ "price", "name", "qty" }, order)
    f.total = f.price * 2
    assert.are.same({ 3, 5, 8 }, f.total:totable())
    f.total = nil
    assert.are.equal(3, f:ncol())
    local g = suiro.frame({ "b", "a" }, { a = suiro.i32 { 1 }, b = { "x" } })
    assert.are.same({ "b", "a" }, g:names())
    assert.are.equal(3, #suiro.frame { nrow = 3 })
    assert.are.equal(0, suiro.frame { nrow = 3 }:ncol())
  end)

  it("suiro.wire", function()
    local s = suiro.wire.encode { 1, 2 }   -- a string: header word and a list of two integers
    assert.are.equal(32, #s)
    assert.are.same({ 1, 2 }, suiro.wire.decode(s))
  end)

  it("typed arrays", function()
    local m = suiro.f64 { 1, 2, 3, 4, 5, 6 }:reshape({ 2, 3 }, "F")  -- n-d: m:shape(), m:order()
    assert.are.same({ 2, 3 }, m:shape())
    assert.are.equal("F", m:order())
    local b = suiro.bytes "\0\1"
    assert.are.equal("\0\1", b:string())
    assert.are.equal(2, #b)
    assert.are.equal(suiro.bytes "\0\1", b)
    assert.are.equal("suiro.bytes(2) 0001", tostring(b))
  end)
end)

describe("suiro.frame spellings", function()
  it("takes names and columns side by side", function()
    local f = suiro.frame { names = { "b", "a" }, columns = { suiro.f64 { 1, 2 }, { "x", "y" } } }
    assert.are.same({ "b", "a" }, f:names())
    assert.are.equal(2.0, f.b[2])
    assert.are.equal("y", f.a[2])
    assert.has_error(function() suiro.frame { names = { "a" }, columns = {} } end, "suiro.frame: 1 names for 0 columns")
  end)

  it("takes columns by name, sorted", function()
    local f = suiro.frame { zeta = suiro.i32 { 1 }, alpha = suiro.i32 { 2 } }
    assert.are.same({ "alpha", "zeta" }, f:names())
    assert.are.equal(1, f:nrow())
  end)
end)
