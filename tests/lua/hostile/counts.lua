-- Counts read from callers (issue 17, item 2): every constructor that takes a count (a field n, a
-- length argument) checks what the count would cost against the memory budget before allocating,
-- and refuses with an error naming the argument, the size and the limit. The battery runs under a
-- 1 GB memory limit (tests/lua/hostile_watch.sh), so a case that allocated instead would die.
local H = require "tests.lua.hostile"

local cases = {}
local function add(c) c.deadline = c.deadline or 15; cases[#cases + 1] = c end

local HUGE = {
  { "1 << 40", 1 << 40 }, { "2^40", 2 ^ 40 }, { "1 << 62", 1 << 62 }, { "math.maxinteger", math.maxinteger },
  { "2^53", 2 ^ 53 },
}
local LIMIT = H.raises_any("memory limit", "too many", "at most")

for _, h in ipairs(HUGE) do
  local n = h[2]
  local ctors = {
    { "suiro.strings { n = %s }", function(E) return E.suiro.strings { n = n } end },
    { "suiro.strings { 'a', n = %s }", function(E) return E.suiro.strings { "a", n = n } end },
    { "suiro.factor { n = %s }", function(E) return E.suiro.factor { n = n } end },
    { "suiro.factor { n = %s } with levels", function(E) return E.suiro.factor({ n = n }, { levels = { "a" } }) end },
    { "suiro.frame { a = { n = %s, 1 } }", function(E) return E.suiro.frame { a = { n = n, 1 } } end },
    { "suiro.frame { a = { n = %s, 'x' } }", function(E) return E.suiro.frame { a = { n = n, "x" } } end },
  }
  if math.type(n) == "integer" then
    for _, ty in ipairs { "f64", "i32", "u8", "bool", "c128", "i64", "f32" } do
      ctors[#ctors + 1] = { "suiro." .. ty .. "(%s)", function(E) return E.suiro[ty](n) end }
      ctors[#ctors + 1] = { "suiro.array('" .. ty .. "', %s)", function(E) return E.suiro.array(ty, n) end }
    end
  end
  for _, c in ipairs(ctors) do
    add {
      name = c[1]:format(h[1]) .. " is refused before allocating",
      run = c[2],
      expect = h[1] == "2^53" and H.raises_any("memory limit", "too many", "at most", "integer") or LIMIT,
    }
  end
end

-- a table whose length (__len) lies: the array is sized by it, so it is checked too
add {
  name = "suiro.array('f64', t) with #t = 2^40 (by __len) is refused before allocating",
  run = function(E) return E.suiro.array("f64", setmetatable({}, { __len = function() return 1 << 40 end })) end,
  expect = LIMIT,
}
-- the message names the argument, the size and the limit
add {
  name = "suiro.strings { n = 2^40 } names n, the bytes and the limit",
  run = function(E) return E.suiro.strings { n = 1 << 40 } end,
  expect = H.raises("suiro.strings", "n", "1099511627776 elements", "exceed the memory limit of"),
}
-- counts that are not counts
for _, b in ipairs { { "-1", -1 }, { "1.5", 1.5 }, { "'x'", "x" }, { "NaN", 0 / 0 } } do
  add {
    name = ("suiro.strings { n = %s } is refused naming n"):format(b[1]),
    run = function(E) return E.suiro.strings { n = b[2] } end,
    expect = H.raises("suiro.strings", "n"),
  }
end
-- sending a string vector whose n was changed after construction
add {
  name = "sending a suiro.strings whose n was set to 2^40 is refused",
  run = function(E)
    local s = E.suiro.strings { "a" }
    rawset(s, "n", 1 << 40)
    return E.suiro.wire.encode(s)
  end,
  expect = H.raises_any("memory limit", "past its n"),
}
-- a map of 2^60 elements, and ranges the engine cannot hold
add {
  name = "pool:map over 2^60 elements is refused",
  run = function(E) return E.P:map(function(x) return x end, E.suiro.range(1, 1 << 60)):collect() end,
  expect = H.raises_any("2^48", "memory limit", "too many", "elements", "shared memory"),
}
-- a table of every element of a big array would take more than the limit
add {
  name = "suiro.f64(2^26 + 1):totable() is refused before building the table",
  run = function(E) return E.suiro.f64((1 << 26) + 1):totable() end,
  expect = H.raises("totable", "memory limit"),
}
-- sane sizes still work under the limit
add {
  name = "suiro.strings { n = 1000 } and suiro.f64(10^6) still work",
  run = function(E) return #E.suiro.strings { n = 1000 }, #E.suiro.f64(1000000) end,
  expect = H.returns(1000, 1000000),
}

return cases
