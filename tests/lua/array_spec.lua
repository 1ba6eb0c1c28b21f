-- suiro.array: typed arrays, and how they cross to workers.
local suiro = require "suiro"

describe("suiro.array", function()
  it("builds, indexes and measures", function()
    local a = suiro.f64 { 1, 2, 3 }
    assert.are.equal(3, #a)
    assert.are.equal(2.0, a[2])
    assert.is_nil(a[4])
    assert.are.equal("f64", a:type())
    local n = 0
    for i, v in ipairs(a) do n = n + 1; assert.are.equal(i * 1.0, v) end
    assert.are.equal(3, n)
    local z = suiro.array("i32", 5)
    assert.are.same({ 0, 0, 0, 0, 0 }, z:totable())
    z[2] = 7
    assert.are.equal(7, z[2])
    assert.are.equal("integer", math.type(z[2]))
  end)

  it("reduces", function()
    local a = suiro.f64 { 4, 1, 3 }
    assert.are.equal(8.0, a:sum())
    assert.are.equal(1.0, a:min())
    assert.are.equal(4.0, a:max())
    assert.are.equal(8 / 3, a:mean())
    assert.are.equal(6, suiro.i64 { 1, 2, 3 }:sum())
    assert.are.equal(0.0, suiro.f64 {}:sum())
  end)

  it("computes element-wise", function()
    local a = suiro.f64 { 1, 2, 3 }
    assert.are.same({ 2, 4, 6 }, (a * 2):totable())
    assert.are.same({ 2, 4, 6 }, (a + a):totable())
    assert.are.same({ -1, -2, -3 }, (-a):totable())
    assert.are.same({ 0.5, 1, 1.5 }, (a / 2):totable())
    assert.are.same({ 0, 1, 2 }, (a - 1):totable())
    assert.are.equal("i64", (suiro.i32 { 1, 2 } + 1):type())
    assert.has_error(function() return a + suiro.f64 { 1 } end)
  end)

  it("slices and copies", function()
    local a = suiro.i32 { 1, 2, 3, 4, 5 }
    assert.are.same({ 2, 3 }, a:slice(2, 3):totable())
    assert.are.same({ 4, 5 }, a:slice(-2):totable())
    local b = a:copy()
    b[1] = 9
    assert.are.equal(1, a[1])
  end)

  it("checks element types and ranges", function()
    local u = suiro.u8 { 1 }
    assert.has_error(function() u[1] = 300 end)
    assert.has_error(function() u[2] = 1 end)
    assert.has_error(function() suiro.array("f16", 3) end)
    local b = suiro.bool { true, false }
    assert.is_true(b[1])
    assert.is_false(b[2])
    assert.matches("^suiro.array f64 {1.0, 2.0}$", tostring(suiro.f64 { 1, 2 }))
  end)

  it("reads and writes NA", function()
    local b = suiro.bool { true, suiro.NA, false }
    assert.are.equal(suiro.NA, b[2])
    assert.are.equal("suiro.array bool {true, NA, false}", tostring(b))
    b[1] = nil -- nil stores NA too
    assert.are.equal(suiro.NA, b[1])
    local x = suiro.f64 { 1, suiro.NA }
    assert.are.equal("7ff00000000007a2", ("%016x"):format(string.unpack("<i8", string.pack("<d", x[2]))))
    assert.are.equal(-2147483648, suiro.i32 { suiro.NA }[1])
    assert.are.equal(math.mininteger, suiro.i64 { suiro.NA }[1])
    assert.has_error(function() suiro.u8 { suiro.NA } end, "suiro.array: u8 arrays have no NA")
  end)

  it("reshapes into n-d arrays", function()
    local m = suiro.f64 { 1, 2, 3, 4, 5, 6 }:reshape({ 2, 3 }, "F")
    assert.are.same({ 2, 3 }, m:shape())
    assert.are.equal("F", m:order())
    assert.are.equal(6, #m)
    assert.are.equal("suiro.array f64 [2x3] F {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}", tostring(m))
    assert.are.equal("C", suiro.i32 { 1, 2 }:reshape { 2 }:order())
    assert.are_not.equal(suiro.i32 { 1, 2 }, suiro.i32 { 1, 2 }:reshape { 2 }) -- a 1-d n-d array is not a vector
    assert.are.same({}, suiro.f64 { 42 }:reshape {}:shape()) -- 0-d
    assert.has_error(function() m:reshape { 4 } end,
      "suiro.array: reshape: shape [4] holds 4 elements, the array has 6")
    assert.has_error(function() m:reshape({ 6 }, "X") end)
  end)

  it("makes dates, timestamps and factors", function()
    local d = suiro.date { 0, 19723 }
    assert.are.equal("date", d:kind())
    assert.are.equal("i32", d:type())
    assert.are.equal(19723, d[2])
    assert.are.equal("f64", suiro.date({ 0.5 }, { type = "f64" }):type())
    local t = suiro.timestamp({ 0, 1700000000000 }, { unit = "ms", tz = "UTC" })
    assert.are.equal("timestamp", t:kind())
    assert.are.equal("ms", t:unit())
    assert.are.equal("UTC", t:tz())
    assert.are.equal("i64", t:type())
    assert.are.equal("s", suiro.timestamp { 1 }:unit())
    assert.are.equal("", suiro.timestamp { 1 }:tz())
    local f = suiro.factor { "hi", "lo", suiro.NA, "hi" }
    assert.are.equal("factor", f:kind())
    assert.are.same({ "hi", "lo" }, f:levels()) -- sorted distinct values by default
    assert.are.same({ "hi", "lo", suiro.NA, "hi" }, f:totable())
    assert.are.same({ 0, 1, -1, 0 }, f:codes():totable()) -- 0-based, -1 = NA
    assert.is_false(f:ordered())
    f[3] = "lo"
    assert.are.equal("lo", f[3])
    assert.has_error(function() f[1] = "mid" end, 'suiro.array: "mid" is not a level of this factor')
    local g = suiro.factor({ "lo", "hi" }, { levels = { "lo", "mid", "hi" }, ordered = true })
    assert.are.same({ 0, 2 }, g:codes():totable())
    assert.is_true(g:ordered())
    assert.are.equal("suiro.array factor ordered {lo, hi}", tostring(g))
    assert.are.equal(g, suiro.factor(suiro.i32 { 0, 2 }, { levels = { "lo", "mid", "hi" }, ordered = true }))
    assert.has_error(function() return g + 1 end, "suiro.array: '+' on a factor is not supported")
    assert.has_error(function() suiro.factor({ "x" }, { levels = { "a" } }) end,
      'suiro.factor: element 1 ("x") is not one of the levels')
    assert.has_error(function() suiro.factor(suiro.i32 { 3 }, { levels = { "a" } }) end,
      "suiro.factor: code 3 (element 1) is not in -1..0")
    assert.has_error(function() suiro.timestamp({ 1 }, { unit = "h" }) end,
      'suiro.timestamp: unit must be one of "s", "ms", "us", "ns", got h')
    assert.has_error(function() suiro.date({ 1 }, { kind = "x" }) end,
      "suiro.date: unknown option kind (options: type)")
    assert.is_nil(suiro.f64 { 1 }:tz())
    assert.are.equal("plain", suiro.f64 { 1 }:kind())
    -- copies and slices keep the kind
    assert.are.equal(t, t:copy())
    assert.are.equal("UTC", t:slice(2):tz())
  end)

  it("crosses to a worker and back", function()
    local pool <close> = suiro.pool { workers = 1 }
    local r = pool:submit(function(x) return x * 2, x:type(), #x end, suiro.f64 { 1, 2, 3 }):collect()
    assert.are.same({ 2, 4, 6 }, r:totable())
    local t, n = select(2, pool:submit(function(x) return x * 2, x:type(), #x end, suiro.i32 { 1 }):collect())
    assert.are.equal("i32", t)
    assert.are.equal(1, n)
  end)
end)

describe("lengths and ranges at their edges (issue 18 item 8)", function()
  it("takes integral floats as lengths, as Lua's own functions do", function()
    assert.are.equal(10, #suiro.array("f64", 10.0))
    assert.are.equal(3, #suiro.i32(3.0))
    assert.has_error(function() suiro.array("f64", 2.5) end,
      "suiro.array: argument 2 must be a length (an integer) or a table of values, got 2.5")
  end)

  it("sends a range whose span exceeds int64 while every element fits", function()
    local r = suiro.range(math.mininteger, math.maxinteger, 1 << 62)
    assert.are.equal(4, #r)
    local back = suiro.wire.decode(suiro.wire.encode(r))
    assert.are.equal(4, #back)
    assert.are.equal(math.mininteger + 3 * (1 << 62), back[4])
  end)
end)
