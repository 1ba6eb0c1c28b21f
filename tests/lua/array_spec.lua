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

  it("crosses to a worker and back", function()
    local pool <close> = suiro.pool { workers = 1 }
    local r = pool:submit(function(x) return x * 2, x:type(), #x end, suiro.f64 { 1, 2, 3 }):collect()
    assert.are.same({ 2, 4, 6 }, r:totable())
    local t, n = select(2, pool:submit(function(x) return x * 2, x:type(), #x end, suiro.i32 { 1 }):collect())
    assert.are.equal("i32", t)
    assert.are.equal(1, n)
  end)
end)
