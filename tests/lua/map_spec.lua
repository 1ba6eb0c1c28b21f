-- pool:map — shared cursor, templates, seeds, streaming, nesting, failures.
local suiro = require "suiro"
local support = require "tests.lua.support"

describe("pool:map", function()
  local pool = support.block_pool { workers = 2 }

  it("maps a table with a scalar template into a suiro.array", function()
    local ys = pool:map(math.sqrt, { 1, 4, 9, 16, 25 }, { template = "f64" }):collect()
    assert.are.equal("f64", ys:type())
    assert.are.same({ 1, 2, 3, 4, 5 }, ys:totable())
  end)

  it("maps without a template into a table of any values", function()
    local ys = pool:map(function(x) return { x = x, s = tostring(x) } end, { 1, 2, 3 }):collect()
    assert.are.same({ { x = 1, s = "1" }, { x = 2, s = "2" }, { x = 3, s = "3" } }, ys)
  end)

  it("maps over suiro.array and suiro.range inputs", function()
    assert.are.same({ 2, 4, 6 }, pool:map(function(x) return x * 2 end, suiro.f64 { 1, 2, 3 }, { template = "f64" })
      :collect():totable())
    local r = pool:map(function(x) return x * x end, suiro.range(1, 10), { template = "i64" }):collect()
    assert.are.equal(385, r:sum())
  end)

  it("keeps each element's number subtype, however the table is staged", function()
    local kind = function(x) return math.type(x) end
    assert.are.same({ "integer", "integer" }, pool:map(kind, { 1, 2 }):collect())
    assert.are.same({ "float", "float" }, pool:map(kind, { 1.0, 0.5 }):collect())
    assert.are.same({ "float", "integer", "integer" }, pool:map(kind, { 1.5, 2, 3 }):collect())
    assert.are.same({ "integer", "float", "string" }, pool:map(function(x) return math.type(x) or type(x) end,
      { 7, 7.0, "7" }):collect())
    local big = pool:map(function(x) return x end, { math.maxinteger, math.mininteger }, { template = "i64" }):collect()
    assert.are.same({ math.maxinteger, math.mininteger }, big:totable())
  end)

  it("hands its results out once and frees its region right after", function()
    local m = pool:map(function(x) return x + 1 end, { 1, 2, 3 }, { template = "f64" })
    assert.are.same({ 2, 3, 4 }, m:collect():totable())
    assert.are.same({ 3, 3 }, { m:progress() })
    assert.has_error(function() m:collect() end, "map:collect: the results were collected already")
    assert.has_error(function() m:results() end, "map:results: the results were collected already")
  end)

  it("handles empty input and a single element", function()
    assert.are.equal(0, #pool:map(math.sqrt, {}, { template = "f64" }):collect())
    assert.are.same({}, pool:map(math.sqrt, {}):collect())
    assert.are.same({ 3 }, pool:map(math.sqrt, { 9 }, { template = "f64" }):collect():totable())
  end)

  it("runs a million elements", function()
    local ys = pool:map(function(x) return x + 1 end, suiro.range(1, 1000000), { template = "f64" }):collect()
    assert.are.equal(1000000, #ys)
    assert.are.equal(2, ys[1])
    assert.are.equal(1000001, ys[1000000])
  end)

  it("supports every template kind", function()
    local b = pool:map(function(x) return x % 2 == 0 end, suiro.range(1, 4), { template = "bool" }):collect()
    assert.are.same({ false, true, false, true }, b:totable())
    local i = pool:map(function(x) return x * 3 end, suiro.range(1, 3), { template = "i32" }):collect()
    assert.are.equal("i32", i:type())
    assert.are.same({ 3, 6, 9 }, i:totable())
    local m = pool:map(function(x) return { x, x * 2, x * 3 } end, suiro.range(1, 4), { template = "f64[3]" }):collect()
    assert.are.same({ 4, 3 }, m:shape())
    assert.are.equal(12.0, m[12])
    local rec = pool:map(function(x) return { mean = x / 2, n = x } end, suiro.range(1, 3),
      { template = "{mean: f64, n: i32}" }):collect()
    assert.are.equal("suiro.frame", getmetatable(rec).__name)
    assert.are.same({ "mean", "n" }, rec:names())
    assert.are.equal(3, rec:nrow())
    assert.are.same({ 0.5, 1, 1.5 }, rec.mean:totable())
    assert.are.same({ 1, 2, 3 }, rec.n:totable())
  end)

  it("reports a template mismatch naming the element", function()
    local m = pool:map(function(x) if x == 3 then return "three" end return x end, suiro.range(1, 5),
      { template = "f64" })
    local ok, err = pcall(m.collect, m)
    assert.is_false(ok)
    assert.are.equal(3, err.index)
    assert.matches("element 3: template f64 cannot hold string", err.message)
  end)

  it("fails fast at the failing element with its index, returning within 100 ms", function()
    local m = pool:map(function(x)
      -- the failure carries its own time (the clock is shared by every process)
      if x == 1234 then error(("bad element %d at %.9f"):format(x, suiro.now())) end
      local t = os.clock() while os.clock() - t < 0.0002 do end
      return x
    end, suiro.range(1, 10000), { template = "f64" })
    local ok, err = pcall(m.collect, m)
    local returned = suiro.now()
    assert.is_false(ok)
    assert.are.equal("remote", err.class)
    assert.are.equal(1234, err.index)
    local failed_at = tonumber(err.message:match("bad element 1234 at ([%d.]+)"))
    assert.is_not_nil(failed_at, err.message)
    local lag = returned - failed_at
    assert.is_true(lag < 0.1, ("returned %.1f ms after the failure"):format(lag * 1e3))
    local done = m:progress()
    assert.is_true(done < 10000)
  end)

  it("times out without cancelling, and a cancelled map fails as cancelled", function()
    local m = pool:map(function(x) local t = os.clock() while os.clock() - t < 0.001 do end return x end,
      suiro.range(1, 100000), { template = "f64" })
    local v, why = m:collect(0.05)
    assert.is_nil(v)
    assert.are.equal("timeout", why)
    local done = m:progress()
    assert.is_true(done < 100000)
    assert.is_true(m:cancel())
    local ok, err = pcall(m.collect, m, 10)
    assert.is_false(ok)
    assert.are.equal("cancelled", err.class)
    assert.matches("cancelled with %d+ of 100000 elements done", err.message)
  end)

  it("gives bitwise-identical seeded results for 1, 2 and 4 workers", function()
    local function draw(workers)
      local p <close> = suiro.pool { workers = workers }
      return p:map(function(x) return suiro.random() + suiro.random(1, 1000) * x end, suiro.range(1, 5000),
        { template = "f64", seed = 42 }):collect()
    end
    local a, b, c = draw(1), draw(2), draw(4)
    assert.is_true(a == b)
    assert.is_true(a == c)
    local d = pool:map(function() return suiro.random() end, suiro.range(1, 100), { template = "f64", seed = 43 })
      :collect()
    assert.is_false(d == a:slice(1, 100))
  end)

  it("streams results as they complete, each exactly once", function()
    local seen, count = {}, 0
    for i, v in pool:map(function(x) return x * x end, suiro.range(1, 2000), { stream = true }):results() do
      assert.is_nil(seen[i])
      seen[i] = true
      assert.are.equal(i * i, v)
      count = count + 1
    end
    assert.are.equal(2000, count)
  end)

  it("iterates a plain map's results in index order", function()
    local out = {}
    for i, v in pool:map(function(x) return -x end, { 5, 6, 7 }):results() do out[#out + 1] = { i, v } end
    assert.are.same({ { 1, -5 }, { 2, -6 }, { 3, -7 } }, out)
  end)

  it("calls a progress function", function()
    local calls, last = 0, nil
    pool:map(function(x) local t = os.clock() while os.clock() - t < 0.0005 do end return x end, suiro.range(1, 600),
      { template = "f64", progress = function(done, n) calls = calls + 1; last = { done, n } end }):collect()
    assert.is_true(calls >= 1)
    assert.are.same({ 600, 600 }, last)
  end)

  it("runs prepared maps many times, swapping the input in place", function()
    local pm = pool:map_prepare(function(x) return x * 10 end, suiro.f64 { 1, 2, 3 }, { template = "f64" })
    assert.are.same({ 10, 20, 30 }, pm:run():totable())
    assert.are.same({ 40, 50, 60 }, pm:run(suiro.f64 { 4, 5, 6 }):totable())
    assert.has_error(function() pm:run(suiro.f64 { 1 }) end)
  end)

  it("awaits inside suiro.run", function()
    local a, b = suiro.run(function()
      local m1 = pool:map(function(x) return x + 1 end, suiro.range(1, 100), { template = "f64" })
      local m2 = pool:map(function(x) return x * 2 end, suiro.range(1, 100), { template = "f64" })
      return m1:await():sum(), m2:await():sum()
    end)
    assert.are.equal(5150, a)
    assert.are.equal(10100, b)
  end)

  it("refuses bad options naming them", function()
    assert.has_error(function() pool:map(math.sqrt, {}, { tmplate = "f64" }) end)
    assert.has_error(function() pool:map(math.sqrt, 42) end,
      "pool:map: argument 2 must be a table, a suiro.array or a suiro.range, got number")
    assert.has_error(function() pool:map(math.sqrt, {}, { template = "f6" }) end)
    assert.has_error(function() pool:map(math.sqrt, {}, { seed = 1.5 }) end,
      "pool:map: seed must be an integer, got 1.5")
  end)
end)

describe("nested maps", function()
  local function nested(workers)
    local pool <close> = suiro.pool { workers = workers }
    local parts = {}
    for k = 0, 3 do parts[k + 1] = suiro.range(k * 25000 + 1, (k + 1) * 25000) end
    local sums = pool:map(function(part)
      local inner = suiro.current_pool():map(math.sqrt, part, { template = "f64" })
      return inner:collect():sum()
    end, parts, { template = "f64" }):collect()
    local r = {}
    for i = 1, 4 do r[i] = math.floor(sums[i] + 0.5) end
    return r
  end

  it("sum sqrt over four parts with one worker", function()
    assert.are.same({ 2635310, 4818361, 6239529, 7388808 }, nested(1))
  end)

  it("sum sqrt over four parts with two workers", function()
    assert.are.same({ 2635310, 4818361, 6239529, 7388808 }, nested(2))
  end)

  it("nest three deep with one worker", function()
    local pool <close> = suiro.pool { workers = 1 }
    local total = pool:map(function(a)
      return suiro.current_pool():map(function(b)
        return suiro.current_pool():map(function(c) return a * 100 + b * 10 + c end, suiro.range(1, 3),
          { template = "f64" }):collect():sum()
      end, suiro.range(1, 3), { template = "f64" }):collect():sum()
    end, suiro.range(1, 3), { template = "f64" }):collect():sum()
    assert.are.equal(5994, total)
  end)
end)
