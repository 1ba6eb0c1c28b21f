-- suiro.call misuse (docs/api.md "Call specs"; issue 8 item 15): bad specs are refused at
-- suiro.call naming the problem; well-formed specs run, and what they cannot send is named.
local H = require "tests.lua.hostile"

local cases = {}
local function add(c) c.deadline = c.deadline or 10; cases[#cases + 1] = c end

local bad = {
  { "5", function() return 5 end, { "suiro.call", "table" } },
  { "nil", function() return nil end, { "suiro.call", "table" } },
  { '"string.rep"', function() return "string.rep" end, { "suiro.call", "table" } },
  { "{}", function() return {} end, { "suiro.call", "first element" } },
  { "{ 5 }", function() return { 5 } end, { "suiro.call", "string" } },
  { "{ print }", function() return { print } end, { "suiro.call", "string" } },
  { '{ "a..b" }', function() return { "a..b" } end, { "a..b" } },
  { '{ "a.b." }', function() return { "a.b." } end, { "a.b." } },
  { '{ "1abc" }', function() return { "1abc" } end, { "1abc" } },
  { '{ "" }', function() return { "" } end, { "function reference" } },
  { '{ "a b" }', function() return { "a b" } end, { "a b" } },
  { '{ "mod.fn", source = "return 1" }', function() return { "mod.fn", source = "return 1" } end, { "not both" } },
  { "{ source = 5 }", function() return { source = 5 } end, { "source" } },
  { "{ source = {} }", function() return { source = {} } end, { "source" } },
  { '{ "f", [1.5] = 1 }', function() return { "f", [1.5] = 1 } end, { "unexpected key" } },
  { '{ "f", [true] = 1 }', function() return { "f", [true] = 1 } end, { "unexpected key" } },
  { '{ "f", [0] = 1 }', function() return { "f", [0] = 1 } end, { "unexpected key" } },
  { '{ "f", [{}] = 1 }', function() return { "f", [{}] = 1 } end, { "unexpected key" } },
}
for _, b in ipairs(bad) do
  add {
    name = ("suiro.call(%s) is refused"):format(b[1]),
    run = function(E) return E.suiro.call(b[2]()) end,
    expect = H.raises(table.unpack(b[3])),
  }
end

local run_ok = {
  { 'suiro.call { "string.rep", "ab", 3 }', function(E) return E.suiro.call { "string.rep", "ab", 3 } end, "ababab" },
  { 'suiro.call { source = "return a + b", a = 1, b = 2 }', function(E)
    return E.suiro.call { source = "return a + b", a = 1, b = 2 }
  end, 3 },
  { 'suiro.call { source = "return ...", 7 }', function(E) return E.suiro.call { source = "return ...", 7 } end, 7 },
  { "a call spec with a cyclic argument", function(E)
    local t = {}
    t.self = t
    return E.suiro.call { source = "local t = ... return t.self == t", t }
  end, true },
}
for _, r in ipairs(run_ok) do
  add {
    name = ("pool:submit(%s) runs it"):format(r[1]),
    run = function(E) return E.P:submit(r[2](E)):collect(5) end,
    expect = H.returns(r[3]),
  }
end
local run_bad = {
  { 'suiro.call { source = "syntax error here" }', function(E) return E.suiro.call { source = "syntax error here" } end, "remote" },
  { 'suiro.call { source = "error(\'no\')" }', function(E) return E.suiro.call { source = "error('no')" } end, "remote" },
  { 'suiro.call { "nosuchmodule_y.fn" }', function(E) return E.suiro.call { "nosuchmodule_y.fn" } end, "remote" },
  { 'suiro.call { "string.nosuchfn" }', function(E) return E.suiro.call { "string.nosuchfn" } end, "remote" },
  { 'suiro.call { source = "while true do end" } with kill', nil, nil },
}
for _, r in ipairs(run_bad) do
  if r[2] then
    add {
      name = ("pool:submit(%s) fails with class %s"):format(r[1], r[3]),
      run = function(E) return E.P:submit(r[2](E)):collect(5) end,
      expect = H.raises_obj { class = r[3] },
    }
  end
end
for _, u in ipairs {
  { "io.stdout as a positional argument", function(E) return E.suiro.call { "string.rep", io.stdout } end, "userdata" },
  { "a coroutine as a named argument", function(E)
    return E.suiro.call { source = "return 1", co = coroutine.create(print) }
  end, "coroutine" },
  { "a pool as an argument", function(E) return E.suiro.call { "string.rep", E.P } end, "cannot be sent" },
} do
  add {
    name = ("a call spec with %s is refused at submit naming it"):format(u[1]),
    run = function(E) return E.P:submit(u[2](E)) end,
    expect = H.raises("submit", u[3]),
  }
end
add {
  name = "a call spec with extra submit arguments: refused, or the arguments are not silently lost",
  run = function(E)
    local ok, v = pcall(function()
      return E.P:submit(E.suiro.call { source = "return select('#', ...)" }, 1, 2):collect(5)
    end)
    if not ok then return "refused" end
    return v
  end,
  expect = H.any_of(H.returns("refused"), H.returns(2)),
}
add {
  name = "a call spec crosses as a value and comes back as a call spec",
  run = function(E)
    local c = E.P:submit(E.F.id, E.suiro.call { "string.rep", "x", 2, sep = "," }):collect(5)
    return getmetatable(c) == getmetatable(E.suiro.call { "a.b" }), c.target, c.args[2], c.named.sep
  end,
  expect = H.returns(true, "string.rep", 2, ","),
}
add {
  name = "suiro.call spec as a map function runs per element",
  run = function(E)
    local r = E.P:map(E.suiro.call { source = "return (...) * 2" }, { 1, 2, 3 }):collect(5)
    return r[1], r[3]
  end,
  expect = H.any_of(H.returns(2, 6), H.raises("pool:map", "argument 1")),
}

return cases
