-- Specs for suiro.parse (engine/conf/suiro/parse.lua) and the examples in docs/config-strings.md.
-- Run from the checkout root: lua5.4 /usr/bin/busted --ignore-lua tests/lua/parse_spec.lua
package.path = "lua/?.lua;lua/?/init.lua;" .. package.path

local lpeg = require "lpeg"
local parse = require "suiro.parse"

local what = { duration = "duration", size = "size", fnref = "function reference", template = "template" }

-- The message parse[name](input) raises, after checking that try_<name> returns nil and the same.
local function failure(name, input)
  local ok, msg = pcall(parse[name], input)
  assert.is_false(ok, "no error for " .. tostring(input))
  local value, msg2 = parse["try_" .. name](input)
  assert.is_nil(value)
  assert.equal(msg, msg2)
  return msg
end

-- Asserts the exact three-line message for a one-line input: the problem, the column, an optional
-- hint, the input again and a caret under the column.
local function fails_at(name, input, why, col, hint)
  local msg = failure(name, input)
  local expected = ("bad %s %q: %s at column %d%s\n    %s\n    %s^"):format(what[name], input, why, col,
    hint and "; " .. hint or "", input, (" "):rep(col - 1))
  assert.equal(expected, msg)
end

local function unexpected(name, input, col, rest)
  fails_at(name, input, rest and ("unexpected %q"):format(rest) or "unexpected end of input", col)
end

local function scalar(t) return { kind = "scalar", type = t } end
local function array(t, ...) return { kind = "array", type = t, shape = { ... } } end
local function list(t) return { kind = "list", of = t } end
local function record(...)
  local fields = {}
  for i = 1, select("#", ...), 2 do
    fields[#fields + 1] = { name = select(i, ...), type = select(i + 1, ...) }
  end
  return { kind = "record", fields = fields }
end

---------------------------------------------------------------------------------------------------

describe("parse.duration", function()
  local valid = {
    { "250ms", 0.25 }, { "2m", 120.0 }, { "30s", 30.0 }, { "1.5h", 5400.0 }, { "10us", 1e-5 },
    { "500ns", 5e-7 }, { "1d", 86400.0 }, { "1m30s", 90.0 }, { "1h30m", 5400.0 },
    { "1d2h3m4s5ms", 93784.005 }, { "1s1s", 2.0 }, { "30s1m", 90.0 }, { "30", 30.0 },
    { "0.5", 0.5 }, { ".5", 0.5 }, { ".5s", 0.5 }, { "0", 0.0 }, { "0s", 0.0 }, { "0ms", 0.0 },
    { "0.000s", 0.0 }, { "1.5ms", 0.0015 }, { "0.25m", 15.0 }, { "100ms", 0.1 }, { "1µs", 1e-6 },
    { "1μs", 1e-6 }, { "007s", 7.0 }, { " 30s ", 30.0 }, { "\t\n1m\r\n", 60.0 },
    { "inf", math.huge }, { "forever", math.huge }, { " forever ", math.huge },
  }
  for _, case in ipairs(valid) do
    it(("reads %q"):format(case[1]), function()
      local v = parse.duration(case[1])
      assert.equal(case[2], v)
      assert.equal("float", math.type(v))
      assert.equal(v, parse.try_duration(case[1]))
    end)
  end

  it("reads many parts", function()
    assert.equal(100000.0, parse.duration(("1s"):rep(100000)))
  end)

  it("takes Lua numbers as seconds, always returning a float", function()
    assert.equal("float", math.type(parse.duration(2)))
    assert.equal(2.0, parse.duration(2))
    assert.equal(0.0, parse.duration(0))
    assert.equal(1.5, parse.duration(1.5))
    assert.equal(math.huge, parse.duration(math.huge))
  end)

  it("refuses negative numbers and NaN", function()
    assert.equal("bad duration -1: negative", failure("duration", -1))
    assert.equal("bad duration -0.5: negative", failure("duration", -0.5))
    assert.equal("bad duration -inf: negative", failure("duration", -math.huge))
    assert.matches("^bad duration %-?nan: not a number$", failure("duration", 0 / 0))
  end)

  it("refuses other types", function()
    assert.equal("bad duration: expected a string or a number, got nil", failure("duration", nil))
    assert.equal("bad duration: expected a string or a number, got boolean", failure("duration", true))
    assert.equal("bad duration: expected a string or a number, got table", failure("duration", {}))
  end)

  it("points at the first character that does not fit", function()
    unexpected("duration", "25 0ms", 4, "0ms")
    unexpected("duration", "", 1)
    unexpected("duration", "   ", 4)
    unexpected("duration", "1m30", 5)
    unexpected("duration", "1x", 2, "x")
    unexpected("duration", "1S", 2, "S")
    unexpected("duration", "1 m", 3, "m")
    unexpected("duration", "1h 30m", 4, "30m")
    unexpected("duration", "-1s", 1, "-1s")
    unexpected("duration", "+1s", 1, "+1s")
    unexpected("duration", "1.s", 2, ".s")
    unexpected("duration", "1..5s", 2, "..5s")
    unexpected("duration", "1,5s", 2, ",5s")
    unexpected("duration", "1e3s", 2, "e3s")
    unexpected("duration", "1mo", 3, "o")
    unexpected("duration", "1mss", 4, "s")
    unexpected("duration", "s", 1, "s")
    unexpected("duration", "ms", 1, "ms")
    unexpected("duration", "infinity", 4, "inity")
    unexpected("duration", "inf5s", 4, "5s")
    unexpected("duration", "Inf", 1, "Inf")
    unexpected("duration", "1w", 2, "w")
    unexpected("duration", "1y", 2, "y")
    unexpected("duration", "1.5h!", 5, "!")
    unexpected("duration", "  5x", 4, "x")
  end)

  it("counts columns in characters", function()
    unexpected("duration", "1.5h✓", 5, "✓")
    unexpected("duration", "1µs2x", 5, "x")
    unexpected("duration", "✓1s", 1, "✓1s")
    unexpected("duration", "1µ", 2, "µ")
  end)

  it("refuses numbers too large to be finite", function()
    local big = ("9"):rep(400)
    assert.equal(('bad duration "  %s...": number too large at column 3\n      %s...\n      ^')
      :format(big:sub(1, 55), big:sub(1, 71)), failure("duration", "  " .. big .. "s"))
  end)
end)

---------------------------------------------------------------------------------------------------

describe("parse.size", function()
  local valid = {
    { "256KiB", 262144 }, { "4MiB", 4194304 }, { "1GiB", 1073741824 }, { "1TiB", 1 << 40 },
    { "1PiB", 1 << 50 }, { "10KB", 10000 }, { "10kB", 10000 }, { "3MB", 3000000 },
    { "2GB", 2000000000 }, { "5TB", 5000000000000 }, { "7PB", 7000000000000000 },
    { "512B", 512 }, { "512", 512 }, { "0", 0 }, { "0B", 0 }, { "0KiB", 0 }, { "1.5KiB", 1536 },
    { "0.5KiB", 512 }, { ".25KiB", 256 }, { "1.50KiB", 1536 }, { "2.0", 2 }, { "1.000B", 1 },
    { "1.1KB", 1100 }, { "0.001KB", 1 }, { "0.0009765625KiB", 1 }, { "1.5GB", 1500000000 },
    { " 64KiB\n", 65536 }, { "0064", 64 },
    { "9223372036854775807", math.maxinteger }, { "9223372036854775807B", math.maxinteger },
    { "9223372036854775.807KB", math.maxinteger }, { "8191PiB", 8191 << 50 },
  }
  for _, case in ipairs(valid) do
    it(("reads %q"):format(case[1]), function()
      local v = parse.size(case[1])
      assert.equal(case[2], v)
      assert.equal("integer", math.type(v))
      assert.equal(v, parse.try_size(case[1]))
    end)
  end

  it("takes whole, non-negative Lua numbers", function()
    assert.equal(4096, parse.size(4096))
    assert.equal("integer", math.type(parse.size(4096.0)))
    assert.equal(1 << 53, parse.size(2.0 ^ 53))
    assert.equal("bad size 1.5: not a whole number of bytes", failure("size", 1.5))
    assert.equal("bad size -1: negative", failure("size", -1))
    assert.equal("bad size 1e+300: number too large", failure("size", 1e300))
    assert.equal("bad size inf: number too large", failure("size", math.huge))
    assert.matches("^bad size %-?nan: not a whole number of bytes$", failure("size", 0 / 0))
    assert.equal("bad size: expected a string or a number, got boolean", failure("size", false))
  end)

  it("refuses ambiguous and unknown units", function()
    unexpected("size", "64k", 3, "k")
    unexpected("size", "64K", 3, "K")
    unexpected("size", "4M", 2, "M")
    unexpected("size", "4m", 2, "m")
    unexpected("size", "4mb", 2, "mb")
    unexpected("size", "4Mb", 2, "Mb")
    unexpected("size", "4kiB", 2, "kiB")
    unexpected("size", "4KIB", 2, "KIB")
    unexpected("size", "4kb", 2, "kb")
    unexpected("size", "8EiB", 2, "EiB")
    unexpected("size", "1 KiB", 3, "KiB")
    unexpected("size", "1KiBs", 5, "s")
  end)

  it("points at malformed numbers", function()
    unexpected("size", "", 1)
    unexpected("size", "KiB", 1, "KiB")
    unexpected("size", "-1", 1, "-1")
    unexpected("size", "1.", 2, ".")
    unexpected("size", "1e3", 2, "e3")
    unexpected("size", "1_000", 2, "_000")
    unexpected("size", "0x10", 2, "x10")
  end)

  it("refuses fractions of a byte", function()
    fails_at("size", "0.5B", "not a whole number of bytes", 1)
    fails_at("size", "0.1", "not a whole number of bytes", 1)
    fails_at("size", "1.1KiB", "not a whole number of bytes", 1)
    fails_at("size", " 1.0001KB", "not a whole number of bytes", 2)
  end)

  it("refuses sizes beyond math.maxinteger", function()
    fails_at("size", "9223372036854775808", "number too large", 1)
    fails_at("size", "8192PiB", "number too large", 1)
    fails_at("size", "9223372036854776KB", "number too large", 1)
    fails_at("size", "99999999999999999999.5", "number too large", 1)
    fails_at("size", "1.0000000000000000000001KiB", "too many digits", 1)
  end)
end)

---------------------------------------------------------------------------------------------------

describe("parse.fnref", function()
  local function r(package, name, internal)
    return { lang = "r", package = package, name = name, internal = internal or false }
  end
  local function dotted(...)
    local path = { ... }
    local module = #path > 1 and table.concat(path, ".", 1, #path - 1) or nil
    return { lang = "dotted", module = module, name = path[#path], path = path }
  end
  local valid = {
    { "stats::quantile", r("stats", "quantile") },
    { "pkg:::hidden", r("pkg", "hidden", true) },
    { "data.table::fread", r("data.table", "fread") },
    { "base::is.na", r("base", "is.na") },
    { "base::.libPaths", r("base", ".libPaths") },
    { "dplyr::as_tibble", r("dplyr", "as_tibble") },
    { "R6::R6Class", r("R6", "R6Class") },
    { "utils:::.DollarNames", r("utils", ".DollarNames", true) },
    { "numpy.mean", dotted("numpy", "mean") },
    { "mymod.fn", dotted("mymod", "fn") },
    { "a.b.c.fn", dotted("a", "b", "c", "fn") },
    { "fn", dotted("fn") },
    { "_private", dotted("_private") },
    { "mod._x9", dotted("mod", "_x9") },
    { "np.linalg.norm", dotted("np", "linalg", "norm") },
    { "  numpy.mean\n", dotted("numpy", "mean") },
  }
  for _, case in ipairs(valid) do
    it(("reads %q"):format(case[1]), function()
      assert.same(case[2], parse.fnref(case[1]))
      assert.same(case[2], parse.try_fnref(case[1]))
    end)
  end

  it("returns a fresh table each time", function()
    local a = parse.fnref "numpy.mean"
    a.path[1] = "changed"
    assert.same({ "numpy", "mean" }, parse.fnref("numpy.mean").path)
  end)

  it("points at the problem", function()
    unexpected("fnref", "", 1)
    unexpected("fnref", "::f", 1, "::f")
    unexpected("fnref", "stats::", 8)
    unexpected("fnref", "stats:quantile", 6, ":quantile")
    unexpected("fnref", "stats:::", 9)
    unexpected("fnref", "pkg::::x", 7, ":x")
    unexpected("fnref", "a::b::c", 5, "::c")
    unexpected("fnref", "numpy.", 7)
    unexpected("fnref", "numpy..mean", 7, ".mean")
    unexpected("fnref", ".hidden", 1, ".hidden")
    unexpected("fnref", "1abc", 1, "1abc")
    unexpected("fnref", "a.1b", 3, "1b")
    unexpected("fnref", ".2x::f", 1, ".2x::f")
    unexpected("fnref", "a b", 3, "b")
    unexpected("fnref", "numpy.mean()", 11, "()")
    unexpected("fnref", "stats::quantile x", 17, "x")
    unexpected("fnref", "base::`+`", 7, "`+`")
    unexpected("fnref", "a-b", 2, "-b")
    unexpected("fnref", "ñ", 1, "ñ")
    unexpected("fnref", "numpy.ñ", 7, "ñ")
  end)

  it("refuses non-strings", function()
    assert.equal("bad function reference: expected a string, got number", failure("fnref", 42))
    assert.equal("bad function reference: expected a string, got nil", failure("fnref", nil))
  end)
end)

---------------------------------------------------------------------------------------------------

describe("parse.template", function()
  local valid = {
    { "f64", scalar "f64" }, { "f32", scalar "f32" }, { "i64", scalar "i64" },
    { "i32", scalar "i32" }, { "u8", scalar "u8" }, { "bool", scalar "bool" },
    { "c128", scalar "c128" }, { "str", scalar "str" }, { "any", scalar "any" },
    { " f64 ", scalar "f64" },
    { "f64[3]", array("f64", 3) }, { "u8[16]", array("u8", 16) }, { "bool[1]", array("bool", 1) },
    { "c128[2]", array("c128", 2) }, { "i32[4]", array("i32", 4) }, { "i64[5]", array("i64", 5) },
    { "f32[6]", array("f32", 6) }, { "f64[2,3]", array("f64", 2, 3) },
    { "f64 [ 2 , 3 ]", array("f64", 2, 3) }, { "f64[2,3,4,5]", array("f64", 2, 3, 4, 5) },
    { "f64[03]", array("f64", 3) },
    { "[f64]", list(scalar "f64") }, { "[ str ]", list(scalar "str") },
    { "[[f64]]", list(list(scalar "f64")) }, { "[f64[3]]", list(array("f64", 3)) },
    { "{mean: f64, sd: f64}", record("mean", scalar "f64", "sd", scalar "f64") },
    { "{sd: f64, mean: f64}", record("sd", scalar "f64", "mean", scalar "f64") },
    { "{x:f64}", record("x", scalar "f64") },
    { "{x: f64,}", record("x", scalar "f64") },
    { "{ p.value: f64, _n: i64, a_1: u8[4] }",
      record("p.value", scalar "f64", "_n", scalar "i64", "a_1", array("u8", 4)) },
    { "{f64: f64, str: any}", record("f64", scalar "f64", "str", scalar "any") },
    { "{a: {b: {c: [bool]}}}", record("a", record("b", record("c", list(scalar "bool")))) },
    { "[{id: i64, tags: [str]}]", list(record("id", scalar "i64", "tags", list(scalar "str"))) },
    { "{\n  mean: f64,\n  sd: f64,\n}\n", record("mean", scalar "f64", "sd", scalar "f64") },
    { "\t{x:\tf64}", record("x", scalar "f64") },
  }
  for _, case in ipairs(valid) do
    it(("reads %q"):format(case[1]), function()
      assert.same(case[2], parse.template(case[1]))
      assert.same(case[2], parse.try_template(case[1]))
    end)
  end

  it("nests 50 deep", function()
    local t = scalar "f64"
    for _ = 1, 50 do t = list(record("a", t)) end
    assert.same(t, parse.template(("[{a: "):rep(50) .. "f64" .. ("}]"):rep(50)))
  end)

  it("refuses nesting past LPeg's limit with a message, not a crash", function()
    local msg = failure("template", ("{a: "):rep(300) .. "f64" .. ("}"):rep(300))
    assert.matches(": too deeply nested at column %d+\n", msg)
  end)

  it("points at syntax errors", function()
    unexpected("template", "", 1)
    unexpected("template", "f64[", 5)
    unexpected("template", "f64[]", 5, "]")
    unexpected("template", "f64[3", 6)
    unexpected("template", "f64[3,]", 7, "]")
    unexpected("template", "f64[-1]", 5, "-1]")
    unexpected("template", "f64[1.5]", 6, ".5]")
    unexpected("template", "f64[3][2]", 7, "[2]")
    unexpected("template", "{}", 2, "}")
    unexpected("template", "{,}", 2, ",}")
    unexpected("template", "{a f64}", 4, "f64}")
    unexpected("template", "{a:}", 4, "}")
    unexpected("template", "{a: f64", 8)
    unexpected("template", "{a: f64 b: f64}", 9, "b: f64}")
    unexpected("template", "{a: f64,, b: f64}", 9, ", b: f64}")
    unexpected("template", "{mean: f64, sd: }", 17, "}")
    unexpected("template", "{1a: f64}", 2, "1a: f64}")
    unexpected("template", "{\"a\": f64}", 2, "\"a\": f64}")
    unexpected("template", "[f64", 5)
    unexpected("template", "[]", 2, "]")
    unexpected("template", "[f64][3]", 6, "[3]")
    unexpected("template", "[f64, i32]", 5, ", i32]")
    unexpected("template", "f64 f64", 5, "f64")
    unexpected("template", "{a: f64}}", 9, "}")
    unexpected("template", "f64✓", 4, "✓")
    unexpected("template", "{é: f64}", 2, "é: f64}")
    unexpected("template", "{a: f64, b: f64, c: f64, d: f64, e: ?}", 37, "?}")
  end)

  it("names unknown types, suggesting a near one", function()
    fails_at("template", "f46", 'unknown type "f46"', 1, "did you mean f64?")
    fails_at("template", "F64", 'unknown type "F64"', 1, "did you mean f64?")
    fails_at("template", "[string]", 'unknown type "string"', 2)
    fails_at("template", "{x: double}", 'unknown type "double"', 5)
    fails_at("template", "{x: f64, y: boool}", 'unknown type "boool"', 13, "did you mean bool?")
    fails_at("template", "u16[2]", 'unknown type "u16"', 1, "did you mean u8?")
  end)

  it("refuses arrays of str and any", function()
    fails_at("template", "str[3]", "str has no fixed-length array form", 4, "use [str] for a list")
    fails_at("template", "{x: any [2]}", "any has no fixed-length array form", 9, "use [any] for a list")
  end)

  it("refuses bad dimensions", function()
    fails_at("template", "f64[0]", "dimension must be at least 1", 5)
    fails_at("template", "f64[2, 00]", "dimension must be at least 1", 8)
    fails_at("template", "f64[99999999999999999999]", "dimension too large", 5)
  end)

  it("refuses duplicate fields, pointing at the second", function()
    fails_at("template", "{a: f64, a: i32}", 'duplicate field "a"', 10)
    fails_at("template", "{a: f64, b: f64, a: f64}", 'duplicate field "a"', 18)
    fails_at("template", "[{x: {y: u8, y: u8}}]", 'duplicate field "y"', 14)
  end)

  it("allows the same field name in different records", function()
    assert.same(record("a", record("a", scalar "u8")), parse.template "{a: {a: u8}}")
  end)

  it("names the line in a multi-line template", function()
    assert.equal('bad template "{\\n  mean: f64,\\n  sd: f64\\n  n: i64\\n}": unexpected "n: i64" at line 4, '
      .. "column 3\n      n: i64\n      ^",
      failure("template", "{\n  mean: f64,\n  sd: f64\n  n: i64\n}"))
    assert.equal('bad template "{\\n  a: flt }": unknown type "flt" at line 2, column 6; did you mean f32?'
      .. "\n      a: flt }\n         ^",
      failure("template", "{\n  a: flt }"))
    assert.equal('bad template "{a: f64,\\13\\n b: u8 c}": unexpected "c}" at line 2, column 8'
      .. "\n     b: u8 c}\n           ^",
      failure("template", "{a: f64,\r\n b: u8 c}"))
  end)

  it("refuses non-strings", function()
    assert.equal("bad template: expected a string, got table", failure("template", { kind = "scalar" }))
    assert.equal("bad template: expected a string, got number", failure("template", 64))
  end)
end)

---------------------------------------------------------------------------------------------------

describe("error messages", function()
  it("have the documented shape and no position prefix", function()
    assert.equal('bad duration "25 0ms": unexpected "0ms" at column 4\n    25 0ms\n       ^',
      failure("duration", "25 0ms"))
  end)

  it("escape control characters in the quote and show them as ? in the echo", function()
    assert.equal('bad duration "1s\\0": unexpected "\\0" at column 3\n    1s?\n      ^',
      failure("duration", "1s\0"))
    assert.equal('bad size "1\\27K": unexpected "\\27K" at column 2\n    1?K\n     ^',
      failure("size", "1\27K"))
  end)

  it("show tabs as single spaces so that the caret lines up", function()
    assert.equal('bad duration "\\9\\0091x": unexpected "x" at column 4\n      1x\n       ^',
      failure("duration", "\t\t1x"))
  end)

  it("escape bytes that are not UTF-8 and count them as one column each", function()
    assert.equal('bad duration "1\\xFFs": unexpected "\\xFFs" at column 2\n    1?s\n     ^',
      failure("duration", "1\255s"))
    assert.equal('bad fnref "\\xC2\\xB5\\xFF": unexpected "\\xC2\\xB5\\xFF" at column 1\n    ???\n    ^',
      failure("fnref", "µ\255"):gsub("function reference", "fnref"))
  end)

  it("quote a quote", function()
    assert.equal('bad fnref "a\\"b": unexpected "\\"b" at column 2\n    a"b\n     ^',
      failure("fnref", 'a"b'):gsub("function reference", "fnref"))
  end)

  it("clip long unexpected text", function()
    assert.equal('bad template "{a: f64 b: f64, c: f64}": unexpected "b: f64, c..." at column 9'
      .. "\n    {a: f64 b: f64, c: f64}\n            ^",
      failure("template", "{a: f64 b: f64, c: f64}"))
  end)

  it("clip long input and shift the echo so that the caret stays near", function()
    local input = "{" .. ("abcdefgh: f64, "):rep(8) .. "x: flt, y: f64}"
    local col = #input - #"flt, y: f64}" + 1
    local msg = failure("template", input)
    local first, echo, caret = msg:match("^(.-)\n    (.-)\n    ([^\n]*)$")
    assert.equal(('bad template "%s...": unknown type "flt" at column %d; did you mean f32?')
      :format(input:sub(1, 57), col), first)
    assert.equal("...", echo:sub(1, 3))
    assert.equal("flt", echo:sub(#caret, #caret + 2))
    assert.equal(40, #caret)
  end)

  it("count columns in characters when shifting", function()
    local msg = failure("duration", ("1µs"):rep(20) .. "1x")
    local echo, caret = msg:match("\n    (.-)\n    ([^\n]*)$")
    assert.matches(": unexpected \"x\" at column 62\n", msg)
    assert.equal("...", echo:sub(1, 3))
    assert.equal(40, #caret)
    assert.equal("x", echo:sub(utf8.offset(echo, 40), utf8.offset(echo, 41) - 1))
  end)
end)

---------------------------------------------------------------------------------------------------

describe("parse.check_keys", function()
  local pool_keys = { "workers", "launcher", "env", "timeout", "interpreter" }
  local function message(...)
    local ok, msg = pcall(parse.check_keys, ...)
    assert.is_false(ok)
    return msg
  end

  it("returns the table when every key is valid", function()
    local t = { workers = 2, env = {} }
    assert.equal(t, parse.check_keys(t, pool_keys, 'pool "fast"'))
    assert.equal(t, parse.check_keys(t, { workers = true, env = true }))
    local empty = {}
    assert.equal(empty, parse.check_keys(empty, {}))
  end)

  it("names the unknown key, where it was, and the valid keys in order", function()
    assert.equal('unknown key "wrokers" in pool "fast" (valid keys: env, interpreter, launcher, timeout, '
      .. "workers); did you mean workers?", message({ wrokers = 2 }, pool_keys, 'pool "fast"'))
    assert.equal('unknown key "colour" (valid keys: env, interpreter, launcher, timeout, workers)',
      message({ colour = "red", workers = 1 }, pool_keys))
  end)

  it("accepts a set of valid keys", function()
    assert.equal('unknown key "wokers" in launcher (valid keys: env, workers); did you mean workers?',
      message({ wokers = 1 }, { workers = true, env = true, path = false }, "launcher"))
  end)

  it("suggests within two edits, transpositions counting as one", function()
    assert.matches("did you mean workers%?$", message({ worker = 1 }, pool_keys))
    assert.matches("did you mean workers%?$", message({ wrkrs = 1 }, pool_keys))
    assert.matches("did you mean timeout%?$", message({ timoeut = 1 }, pool_keys))
    assert.matches("did you mean env%?$", message({ Env = 1 }, pool_keys))
    assert.matches("did you mean env%?$", message({ e = 1 }, pool_keys))
    assert.matches("%)$", message({ wrks = 1 }, pool_keys))
    assert.matches("%)$", message({ threads = 1 }, pool_keys))
  end)

  it("suggests the first of equally near keys in sorted order", function()
    assert.matches("did you mean ab%?$", message({ a = 1 }, { "b", "ab", "ac" }))
  end)

  it("reports the first unknown key in sorted order, strings before others", function()
    assert.matches('^unknown key "b"', message({ c = 1, b = 2, [1] = 3, workers = 4 }, pool_keys))
    assert.matches("^unknown key %[1%] in pool %(valid keys", message({ 3 }, pool_keys, "pool"))
    assert.matches("^unknown key %[true%]", message({ [true] = 1 }, pool_keys))
  end)

  it("says when no key is valid", function()
    assert.equal('unknown key "x" in launcher (valid keys: none)', message({ x = 1 }, {}, "launcher"))
  end)

  it("quotes odd keys", function()
    assert.equal('unknown key "a\\nb" (valid keys: env)', message({ ["a\nb"] = 1 }, { "env" }))
  end)

  it("checks its arguments", function()
    assert.matches("bad argument #1 to 'check_keys' %(table expected, got nil%)", message(nil, {}))
    assert.matches("bad argument #2 to 'check_keys' %(table expected, got string%)", message({}, "workers"))
  end)
end)

---------------------------------------------------------------------------------------------------

describe("parse.patterns", function()
  it("are LPeg patterns", function()
    for _, name in ipairs { "duration", "size", "fnref", "template" } do
      assert.equal("pattern", lpeg.type(parse.patterns[name]))
    end
  end)

  it("match a prefix and capture the value", function()
    assert.equal(90.0, parse.patterns.duration:match("1m30s and more"))
    assert.equal(25.0, parse.patterns.duration:match("25 0ms"))
    assert.equal(4194304, parse.patterns.size:match("4MiB, 2"))
    assert.same({ lang = "r", package = "stats", name = "sd", internal = false },
      parse.patterns.fnref:match("stats::sd(x)"))
    assert.same(array("f64", 3), parse.patterns.template:match(" f64[3] rest"))
  end)

  it("return the end position after the capture", function()
    assert.equal(6, select(2, (parse.patterns.duration * lpeg.Cp()):match("1m30sx")))
  end)

  it("fail without raising, also on values the checks refuse", function()
    assert.is_nil(parse.patterns.duration:match("x"))
    assert.is_nil(parse.patterns.size:match("0.5B"))
    assert.is_nil(parse.patterns.size:match("8192PiB"))
    assert.is_nil(parse.patterns.template:match("f46"))
    assert.is_nil(parse.patterns.template:match("{a: u8, a: u8}"))
    assert.is_nil(parse.patterns.template:match("str[2]"))
  end)

  it("compose into bigger grammars", function()
    local entry = lpeg.C"timeout" * "=" * parse.patterns.duration + lpeg.C"limit" * "=" * parse.patterns.size
    local entries = lpeg.Ct(lpeg.Ct(entry) * ("," * lpeg.Ct(entry))^0) * -1
    assert.same({ { "timeout", 0.25 }, { "limit", 1024 } }, entries:match("timeout=250ms,limit=1KiB"))
    local refs = lpeg.Ct(parse.patterns.fnref * ("," * parse.patterns.fnref)^0)
    assert.same({ "quantile", "mean" }, { refs:match("stats::quantile,np.mean")[1].name,
                                          refs:match("stats::quantile,np.mean")[2].name })
  end)
end)

---------------------------------------------------------------------------------------------------
-- Every example in docs/config-strings.md: in ```lua blocks, a line of Lua, then `-->` and the
-- values it returns (Lua, possibly over several `-->` lines), or `--> error:` and the message.

describe("docs/config-strings.md", function()
  local examples = {}
  local file = assert(io.open("docs/config-strings.md"))
  local in_lua, lineno = false, 0
  for line in file:lines() do
    lineno = lineno + 1
    if line:match("^```") then
      in_lua = line == "```lua"
    elseif in_lua and line:match("^%-%->") then
      local ex = assert(examples[#examples], "--> before any example, line " .. lineno)
      ex.expected[#ex.expected + 1] = line:sub(5)
    elseif in_lua and line:match("%S") then
      local code, result = line:match("^(.-)%s*%-%-> (.*)$")
      examples[#examples + 1] = { line = lineno, code = code or line, expected = { result } }
    end
  end
  file:close()

  it("has examples for every language", function()
    assert.is_true(#examples >= 60, "only " .. #examples .. " examples")
    for _, name in ipairs { "duration", "size", "fnref", "template", "try_size", "check_keys", "patterns" } do
      local found = false
      for _, ex in ipairs(examples) do found = found or ex.code:find("parse." .. name, 1, true) ~= nil end
      assert.is_true(found, "no example of parse." .. name)
    end
  end)

  local env = setmetatable({ parse = parse, lpeg = lpeg }, { __index = _G })
  for _, ex in ipairs(examples) do
    it(("line %d: %s"):format(ex.line, ex.code), function()
      assert.is_true(#ex.expected > 0, "example without a result")
      local run = assert(load("return " .. ex.code, "=example", "t", env))
      local expected = table.concat(ex.expected, "\n")
      local message = expected:match("^error: (.*)$")
      if message then
        local ok, err = pcall(run)
        assert.is_false(ok, "no error")
        assert.equal(message, err)
      else
        local want = table.pack(assert(load("return " .. expected, "=expected", "t", env))())
        local got = table.pack(run())
        assert.same(want, got)
        for i = 1, want.n do assert.equal(math.type(want[i]), math.type(got[i])) end
      end
    end)
  end
end)
