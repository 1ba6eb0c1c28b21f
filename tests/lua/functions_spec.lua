-- Shipping functions: upvalues, recursion, C functions, references, call specs.
local suiro = require "suiro"
local support = require "tests.lua.support"

describe("shipping functions", function()
  local pool = support.block_pool { workers = 2 }

  it("runs each function's own code when collected functions' addresses come back", function()
    -- A new prototype each time, made and sent in a frame that is gone before the next: once
    -- collected, the allocator hands its address to the next one (almost every time, here).
    local makers = {}
    for i = 1, 200 do makers[i] = load("return function(x) return x + " .. i .. " end") end
    local function run(i) return pool:submit(makers[i](), 1):collect() end
    for i = 1, 200 do
      collectgarbage()
      assert.are.equal(i + 1, run(i))
    end
  end)

  it("copies number and string upvalues as snapshots", function()
    local base, label = 10, "sum"
    local f = function(x) return label, base + x end
    assert.are.same({ "sum", 15 }, { pool:submit(f, 5):collect() })
    base = 20 -- a new snapshot for the next submit
    assert.are.same({ "sum", 25 }, { pool:submit(f, 5):collect() })
  end)

  it("copies table upvalues, keeping cycles", function()
    local t = { name = "root", items = { 1, 2, 3 } }
    t.self = t
    t.items.parent = nil
    local f = function() return t.self.self.name, #t.items, t.self == t end
    local name, n, same = pool:submit(f):collect()
    assert.are.equal("root", name)
    assert.are.equal(3, n)
    assert.is_true(same)
  end)

  it("returns tables with cycles and shared parts intact", function()
    local a, b = pool:submit(function()
      local shared = { 1 }
      local c = { left = shared, right = shared }
      c.me = c
      return c, shared
    end):collect()
    assert.are.equal(a.left, a.right)
    assert.are.equal(a, a.me)
    assert.are.same({ 1 }, b)
  end)

  it("ships recursive local functions", function()
    local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
    assert.are.equal(6765, pool:submit(fib, 20):collect())
  end)

  it("ships helper functions captured as upvalues", function()
    local function square(x) return x * x end
    local function sum_squares(n) local s = 0 for i = 1, n do s = s + square(i) end return s end
    assert.are.equal(385, pool:submit(sum_squares, 10):collect())
  end)

  it("ships many distinct closures whose helpers load while the cache grows", function()
    -- each task is a new prototype capturing a new helper prototype: the worker's prototype cache
    -- grows (at 64, 128, ...) while it decodes a task's captured helper, which once left the
    -- task's cache entry dangling (a use after free under AddressSanitizer)
    for i = 1, 300 do
      local helper = assert(load(("return function(x) return x + %d end"):format(i)))()
      local task = assert(load(("local h = ...; return function(n) return h(n) * %d end"):format(i)))(helper)
      assert.are.equal((5 + i) * i, pool:submit(task, 5):collect())
    end
  end)

  it("resolves C functions of the standard library by name", function()
    local fmt, floor = string.format, math.floor
    assert.are.equal("x=3", pool:submit(function(v) return fmt("x=%d", floor(v)) end, 3.7):collect())
    assert.are.equal(4, pool:submit(math.max, 1, 4, 2):collect())
  end)

  it("refuses a userdata upvalue, naming it", function()
    local out = io.stdout
    local ok, err = pcall(pool.submit, pool, function() return out end)
    assert.is_false(ok)
    assert.matches("upvalue 'out': userdata %(FILE%*%) cannot be sent", err)
  end)

  it("refuses a coroutine upvalue", function()
    local co = coroutine.create(function() end)
    local ok, err = pcall(pool.submit, pool, function() return co end)
    assert.is_false(ok)
    assert.matches("upvalue 'co': a coroutine cannot be sent", err)
  end)

  it("resolves module references with require in the worker", function()
    assert.are.equal(5, pool:submit("mymod.add", 2, 3):collect())
    assert.are.equal(14, pool:submit("mymod.sub.twice", 7):collect())
  end)

  it("runs call specs: name with positional and named arguments", function()
    assert.are.equal(5, pool:submit(suiro.call { "mymod.add", 2, 3 }):collect())
    assert.are.equal(30, pool:submit(suiro.call { "mymod.named", 10, scale = 3 }):collect())
  end)

  it("runs call specs: source with named arguments as globals", function()
    assert.are.equal(3, pool:submit(suiro.call { source = "return a + b", a = 1, b = 2 }):collect())
    assert.are.equal(6, pool:submit(suiro.call { source = "local x, y = ... return x * y", 2, 3 }):collect())
  end)

  it("reports a missing function by name", function()
    local t = pool:submit("mymod.nope", 1)
    local ok, err = pcall(t.collect, t)
    assert.is_false(ok)
    assert.matches('cannot find function "mymod.nope"', err.message)
    t = pool:submit("nomodule.fn", 1)
    ok, err = pcall(t.collect, t)
    assert.is_false(ok)
    -- one message for every worker (suiro_exec): the name, not Lua's search path
    assert.are.equal('cannot find function "nomodule.fn"', err.message)
  end)

  it("validates call specs at once", function()
    assert.has_error(function() suiro.call {} end)
    assert.has_error(function() suiro.call { 42 } end, "suiro.call: the function name must be a string, got number")
    assert.has_error(function() suiro.call { "a.b", source = "x" } end,
      "suiro.call: give a function name or source, not both")
    assert.has_error(function() pool:submit(suiro.call { "mymod.add", 1, 2 }, 3) end)
  end)
end)
