-- suiro.wire.decode of malformed and hostile bytes, and suiro.wire.encode of what cannot be
-- encoded (docs/api.md "suiro.wire", docs/wire-format.md §7: malformed input raises an error
-- naming the byte; a valid buffer decodes and re-encodes to the same bytes).
local H = require "tests.lua.hostile"

local cases = {}
local function add(c) c.deadline = c.deadline or 20; cases[#cases + 1] = c end

local HDR = "SUIRO\1\0\0"
local function hw(tag, aux, n) return string.pack("<BBI6", tag, aux or 0, n or 0) end
local function word(v) return string.pack("<i8", v) end
local function uword(v) return string.pack("<I8", v) end
local function str_part(s) return hw(0x06, 0, #s) .. s .. ("\0"):rep((8 - #s % 8) % 8) end
local BIG = (1 << 48) - 1

-- a malformed buffer must raise "cannot decode value: ... at byte N" (N inside the buffer)
local function malformed()
  return H.checker("raises \"cannot decode value: ...\" naming a byte inside the buffer", function(o)
    if o.ok then return false, "it decoded" end
    local e = o.v[1]
    if type(e) ~= "string" or not e:find("cannot decode value", 1, true) then return false, "message " .. tostring(e) end
    if not e:find("byte %d+") then return false, "no byte offset in the message" end
    return true
  end)
end

local hostile = {
  { "the empty string", "" },
  { "7 bytes", HDR:sub(1, 7) },
  { "the header alone", HDR },
  { "9 bytes", HDR .. "\1" },
  { "a bad magic", "XUIRO\1\0\0" .. hw(1) },
  { "version 2", "SUIRO\2\0\0" .. hw(1) },
  { "version 0", "SUIRO\0\0\0" .. hw(1) },
  { "unknown header flags", "SUIRO\1\2\0" .. hw(1) },
  { "a nonzero reserved byte", "SUIRO\1\0\1" .. hw(1) },
  { "the backref flag without a backref", "SUIRO\1\1\0" .. hw(1) },
  { "a backref without the flag", HDR .. hw(0x0B, 0, 1) .. hw(0x15, 0, 0) },
  { "tag 0x00", HDR .. hw(0x00) },
  { "tag 0x17", HDR .. hw(0x17) },
  { "tag 0xff", HDR .. hw(0xFF) },
  { "nil with n = 1", HDR .. hw(0x01, 0, 1) },
  { "bool aux 2", HDR .. hw(0x02, 2) },
  { "an i64 word holding a small value", HDR .. hw(0x04) .. word(5) },
  { "a str of 2^48 - 1 bytes", HDR .. hw(0x06, 0, BIG) },
  { "a str with nonzero padding", HDR .. hw(0x06, 0, 1) .. "a\1\0\0\0\0\0\0" },
  { "bytes of 2^48 - 1", HDR .. hw(0x07, 0, BIG) },
  { "an f64 array of 2^48 - 1 elements", HDR .. hw(0x08, 1, BIG) },
  { "an array of element type 0", HDR .. hw(0x08, 0, 1) .. word(0) },
  { "an array of element type 8", HDR .. hw(0x08, 8, 1) .. word(0) },
  { "a bool array holding 2", HDR .. hw(0x08, 6, 1) .. "\2\0\0\0\0\0\0\0" },
  { "an ndarray of 65 dimensions", HDR .. hw(0x09, 1, 65) .. word(0) .. ("\1\0\0\0\0\0\0\0"):rep(65) },
  { "an ndarray whose extents multiply past 2^48", HDR .. hw(0x09, 1, 2) .. word(0) .. uword(1 << 32) .. uword(1 << 32) },
  { "an ndarray with an extent of 2^63", HDR .. hw(0x09, 1, 1) .. word(0) .. uword(1 << 63) },
  { "an ndarray with order 2", HDR .. hw(0x09, 1, 1) .. word(2) .. uword(1) .. word(0) },
  { "a strs of 2^48 - 1 strings", HDR .. hw(0x0A, 0, BIG) },
  { "a strs whose lengths overflow", HDR .. hw(0x0A, 0, 2) .. uword(1 << 62) .. uword(1 << 62) },
  { "a strs length of 2^48", HDR .. hw(0x0A, 0, 1) .. uword(1 << 48) },
  { "a list of 2^48 - 1 items", HDR .. hw(0x0B, 0, BIG) },
  { "a dict of 2^47 entries", HDR .. hw(0x0C, 0, 1 << 47) },
  { "a dict key that is an integer", HDR .. hw(0x0C, 0, 1) .. hw(0x03, 0, 1) .. hw(0x01) },
  { "a frame of 2^48 - 1 rows", HDR .. hw(0x0D, 0, 1) .. uword(BIG) .. str_part("x") .. hw(0x08, 1, 0) },
  { "a frame column shorter than its rows", HDR .. hw(0x0D, 0, 1) .. uword(2) .. str_part("x") .. hw(0x08, 1, 1) .. word(0) },
  { "a frame column that is a list", HDR .. hw(0x0D, 0, 1) .. uword(0) .. str_part("x") .. hw(0x0B, 0, 0) },
  { "a factor code past its levels", HDR .. hw(0x0E, 0, 1) .. string.pack("<i4", 5) .. "\0\0\0\0" .. hw(0x0A, 0, 1) .. uword(1) .. "a\0\0\0\0\0\0\0" },
  { "a factor with an NA level", HDR .. hw(0x0E, 0, 1) .. string.pack("<i4", 0) .. "\0\0\0\0" .. hw(0x0A, 0, 1) .. uword(~0) },
  { "a factor aux 2", HDR .. hw(0x0E, 2, 0) .. hw(0x0A, 0, 0) },
  { "a date of c128", HDR .. hw(0x0F, 7, 0) },
  { "a timestamp unit 4", HDR .. hw(0x10, 3, 0) .. uword(4) .. str_part("") },
  { "an error index -2", HDR .. hw(0x11) .. word(-2) .. str_part("c") .. str_part("m") .. str_part("") },
  { "a call aux 2", HDR .. hw(0x12, 2) .. str_part("f") .. hw(0x0B) .. hw(0x0C) },
  { "a call with an empty target", HDR .. hw(0x12, 0) .. str_part("") .. hw(0x0B) .. hw(0x0C) },
  { "a call whose arguments are not a list", HDR .. hw(0x12, 0) .. str_part("f") .. hw(0x0C) .. hw(0x0C) },
  { "a ref of 65 dimensions", HDR .. hw(0x13, 1, 65) .. word(0) .. word(0) .. word(64) .. word(8) .. ("\1\0\0\0\0\0\0\0"):rep(65) .. str_part("/x") },
  { "a ref with an empty name", HDR .. hw(0x13, 1, 0) .. word(0) .. word(0) .. word(64) .. word(8) .. str_part("") },
  { "a ref name of 256 bytes", HDR .. hw(0x13, 1, 0) .. word(0) .. word(0) .. word(64) .. word(8) .. str_part("/" .. ("a"):rep(255)) },
  { "a ref name with a NUL", HDR .. hw(0x13, 1, 0) .. word(0) .. word(0) .. word(64) .. word(8) .. str_part("/a\0b") },
  { "a ref at an offset not a multiple of 8", HDR .. hw(0x13, 1, 0) .. word(0) .. word(0) .. word(65) .. word(8) .. str_part("/x") },
  { "a ref whose length is not whole elements", HDR .. hw(0x13, 1, 0) .. word(0) .. word(0) .. word(64) .. word(12) .. str_part("/x") },
  { "a ref whose shape disagrees with its length", HDR .. hw(0x13, 1, 1) .. word(0) .. word(0) .. word(64) .. word(16) .. uword(3) .. str_part("/x") },
  { "a ref of kind 0x41", HDR .. hw(0x13, 0x41, 0) .. word(0) .. word(0) .. word(64) .. word(8) .. str_part("/x") },
  { "a wire ref of length 12", HDR .. hw(0x13, 0x40, 0) .. word(0) .. word(0) .. word(64) .. word(12) .. str_part("/x") },
  { "a ref offset of 2^48", HDR .. hw(0x13, 1, 0) .. word(0) .. word(0) .. uword(1 << 48) .. word(8) .. str_part("/x") },
  { "a func of language 4", HDR .. hw(0x14, 4, 1) .. word(0) .. str_part("f") },
  { "a func without children", HDR .. hw(0x14, 1, 0) .. word(0) },
  { "a func by name whose name is nil", HDR .. hw(0x14, 1, 1) .. word(0) .. hw(0x01) },
  { "a forward backref", "SUIRO\1\1\0" .. hw(0x0B, 0, 1) .. hw(0x15, 0, 1) },
  { "a backref as a dict key", "SUIRO\1\1\0" .. hw(0x0C, 0, 1) .. hw(0x15, 0, 0) .. hw(0x01) },
  { "a range with step 0", HDR .. hw(0x16, 0, 3) .. word(1) .. word(0) },
  { "a range that overflows int64", HDR .. hw(0x16, 0, 3) .. word(math.maxinteger - 1) .. word(1) },
  { "a range of 2^48 - 1 elements of step 2^20", HDR .. hw(0x16, 0, BIG) .. word(0) .. word(1 << 20) },
  { "65 nested lists", HDR .. hw(0x0B, 0, 1):rep(64) .. hw(0x0B, 0, 1) .. hw(0x01) },
  { "bytes after the value", HDR .. hw(0x01) .. hw(0x01) },
  { "a list of 3 with 2 items", HDR .. hw(0x0B, 0, 3) .. hw(0x01) .. hw(0x01) },
}
for _, h in ipairs(hostile) do
  add { name = ("decode of %s raises naming the byte"):format(h[1]), run = function(E) return E.suiro.wire.decode(h[2]) end,
    expect = malformed() }
  add { name = ("decode of %s (describe = true) raises naming the byte"):format(h[1]),
    run = function(E) return E.suiro.wire.decode(h[2], { describe = true }) end, expect = malformed() }
end

local edge_ok = {
  { "a range of 2^48 - 1 elements", HDR .. hw(0x16, 0, BIG) .. word(math.mininteger) .. word(1), function(r) return #r == BIG end },
  { "a range of one element at math.maxinteger", HDR .. hw(0x16, 0, 1) .. word(math.maxinteger) .. word(1),
    function(r) return r[1] == math.maxinteger end },
  { "a range of step math.mininteger, 2 elements", HDR .. hw(0x16, 0, 2) .. word(math.maxinteger) .. word(math.mininteger),
    function(r) return r[2] == -1 end },
  { "64 nested lists around nothing", HDR .. hw(0x0B, 0, 1):rep(63) .. hw(0x0B, 0, 0), function(t) return type(t) == "table" end },
  { "an i64 word holding math.mininteger", HDR .. hw(0x04) .. word(math.mininteger), function(v) return v == math.mininteger end },
  { "an f64 NaN with payload", HDR .. hw(0x05) .. uword(0x7FF00000000007A2), function(v) return v ~= v end },
}
for _, e in ipairs(edge_ok) do
  add {
    name = ("decode of %s gives it, and it re-encodes to the same bytes"):format(e[1]),
    run = function(E)
      local v = E.suiro.wire.decode(e[2])
      return e[3](v), E.suiro.wire.encode(v) == e[2]
    end,
    expect = H.returns(true, true),
  }
end

-- every golden vector: decodes (describe) and re-encodes exactly; every truncation and every
-- single bit flip raises naming the byte or decodes to a value that re-encodes to those bytes
local vectors = {}
local ls = io.popen("ls tests/vectors/*.bin 2>/dev/null")
for path in ls:lines() do vectors[#vectors + 1] = path end
ls:close()
table.sort(vectors)
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
for _, path in ipairs(vectors) do
  local name = path:match("([^/]+)%.bin$")
  add {
    name = ("golden vector %s decodes (describe) and re-encodes to the same bytes"):format(name),
    run = function(E)
      local s = read(path)
      return E.suiro.wire.encode(E.suiro.wire.decode(s, { describe = true })) == s
    end,
    expect = H.returns(true),
  }
  add {
    name = ("every truncation of golden vector %s raises naming the byte"):format(name),
    run = function(E)
      local s = read(path)
      for n = 0, #s - 1 do
        local ok, e = pcall(E.suiro.wire.decode, s:sub(1, n), { describe = true })
        if ok then return "truncation to " .. n .. " bytes decoded" end
        if not tostring(e):find("cannot decode value.*byte %d+") then return "truncation to " .. n .. ": " .. tostring(e) end
      end
      return true
    end,
    expect = H.returns(true),
  }
  add {
    name = ("every bit flip of golden vector %s raises naming the byte or decodes canonically"):format(name),
    run = function(E)
      local s = read(path)
      local limit = math.min(#s, 512)
      for i = 1, limit do
        for b = 0, 7 do
          local c = string.char(s:byte(i) ~ (1 << b))
          local f = s:sub(1, i - 1) .. c .. s:sub(i + 1)
          local ok, v = pcall(E.suiro.wire.decode, f, { describe = true })
          if ok then
            local ok2, back = pcall(E.suiro.wire.encode, v)
            if not ok2 or back ~= f then return ("flip of byte %d bit %d decoded but re-encodes differently"):format(i - 1, b) end
          elseif not tostring(v):find("cannot decode value.*byte %d+") then
            return ("flip of byte %d bit %d: %s"):format(i - 1, b, tostring(v))
          end
        end
      end
      return true
    end,
    expect = H.returns(true), deadline = 30,
  }
end

-- arguments that are not bytes
for _, a in ipairs {
  { "nil", function() return nil end }, { "5", function() return 5 end }, { "{}", function() return {} end },
  { "true", function() return true end }, { "io.stdout", function() return io.stdout end },
} do
  add {
    name = ("suiro.wire.decode(%s) is refused naming argument 1"):format(a[1]),
    run = function(E) return E.suiro.wire.decode(a[2]()) end,
    expect = H.raises("suiro.wire.decode", "argument 1"),
  }
end
for _, a in ipairs { { "5", 5 }, { '"x"', "x" }, { "true", true } } do
  add {
    name = ("suiro.wire.decode(s, %s) is refused naming argument 2"):format(a[1]),
    run = function(E) return E.suiro.wire.decode(E.suiro.wire.encode(1), a[2]) end,
    expect = H.raises("suiro.wire.decode", "argument 2"),
  }
end

-- values that cannot be encoded
local unencodable = {
  { "io.stdout", function() return io.stdout end, "userdata" },
  { "a coroutine", function() return coroutine.create(print) end, "coroutine" },
  { "a list nested 100000 deep", function()
    local t = {}
    local c = t
    for _ = 1, 100000 do c[1] = {}; c = c[1] end
    return t
  end, "deep" },
  { "suiro.range(math.mininteger, math.maxinteger)", function(E) return E.suiro.range(math.mininteger, math.maxinteger) end, "range" },
  { "suiro.range(1, math.maxinteger)", function(E) return E.suiro.range(1, math.maxinteger) end, "range" },
  { "suiro.range(math.maxinteger, math.mininteger, -1)", function(E)
    return E.suiro.range(math.maxinteger, math.mininteger, -1)
  end, "range" },
  { "a ref descriptor with a numeric name", function(E)
    return E.suiro.wire.ref { name = 5, type = "f64", offset = 64, length = 8 }
  end, "name" },
  { "a ref descriptor of type f65", function(E) return E.suiro.wire.ref { name = "/x", type = "f65", offset = 64, length = 8 } end, "type" },
  { 'a ref descriptor of order "X"', function(E)
    return E.suiro.wire.ref { name = "/x", type = "f64", order = "X", offset = 64, length = 8 }
  end, "order" },
  { "a ref descriptor with offset -8", function(E) return E.suiro.wire.ref { name = "/x", type = "f64", offset = -8, length = 8 } end, "offset" },
  { "a ref descriptor with length 1.5", function(E) return E.suiro.wire.ref { name = "/x", type = "f64", offset = 64, length = 1.5 } end, "length" },
  { "a ref descriptor with length 12 of f64", function(E)
    return E.suiro.wire.ref { name = "/x", type = "f64", offset = 64, length = 12 }
  end, "length" },
  { 'a ref descriptor with shape {"a"}', function(E)
    return E.suiro.wire.ref { name = "/x", type = "f64", offset = 64, length = 8, shape = { "a" } }
  end, "shape" },
  { "a ref descriptor with 65 extents", function(E)
    local sh = {}
    for i = 1, 65 do sh[i] = 1 end
    return E.suiro.wire.ref { name = "/x", type = "f64", offset = 64, length = 8, shape = sh }
  end, "dimensions" },
  { "a ref descriptor with an empty name", function(E) return E.suiro.wire.ref { name = "", type = "f64", offset = 64, length = 8 } end, "name" },
  { "a func descriptor of lang cobol", function(E) return E.suiro.wire.func { lang = "cobol", key = 1 } end, "lang" },
  { "a func descriptor without key", function(E) return E.suiro.wire.func { lang = "lua" } end, "key" },
  { "a func descriptor with captured = 5", function(E) return E.suiro.wire.func { lang = "lua", key = 1, captured = 5 } end, "captured" },
  { "a func descriptor by name with no name", function(E) return E.suiro.wire.func { lang = "lua", key = 0 } end, "name" },
}
for _, u in ipairs(unencodable) do
  add {
    name = ("suiro.wire.encode of %s is refused naming %s"):format(u[1], u[3]),
    run = function(E) return E.suiro.wire.encode(u[2](E)) end,
    expect = H.raises(u[3]),
  }
end
for _, d in ipairs {
  { "suiro.wire.ref(5)", function(E) return E.suiro.wire.ref(5) end, "argument 1" },
  { "suiro.wire.ref { bogus = 1 }", function(E) return E.suiro.wire.ref { bogus = 1 } end, "bogus" },
  { "suiro.wire.func(nil)", function(E) return E.suiro.wire.func(nil) end, "argument 1" },
  { "suiro.wire.func { bogus = 1 }", function(E) return E.suiro.wire.func { bogus = 1 } end, "bogus" },
} do
  add { name = d[1] .. " is refused naming " .. d[3], run = d[2], expect = H.raises(d[3]) }
end
add {
  name = "a cyclic table encodes with a backref and decodes to the cycle",
  run = function(E)
    local t = { 1 }
    t[2] = t
    local v = E.suiro.wire.decode(E.suiro.wire.encode(t))
    return v[2] == v, v[1]
  end,
  expect = H.returns(true, 1),
}
add {
  name = "suiro.wire.encode of a Lua function without a pool is refused, or encodes by name",
  run = function(E) return E.suiro.wire.encode(function() end) end,
  expect = H.raises("function"),
}

return cases
