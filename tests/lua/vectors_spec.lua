-- The golden vectors (tests/vectors, docs/wire-format.md §9) in Lua: every NAME.bin decodes to the
-- value NAME.txt describes (built here from the notation with suiro's own constructors), that value
-- and the decoded one both encode to NAME.bin byte for byte, and no truncation or corruption of
-- NAME.bin crashes the decoder.
local suiro = require "suiro"

local DIR = "tests/vectors/"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

local function vector_names()
  local names = {}
  local p = assert(io.popen("ls " .. DIR))
  for file in p:lines() do
    local name = file:match("^(.+)%.bin$")
    if name then names[#names + 1] = name end
  end
  p:close()
  table.sort(names)
  return names
end

---------------------------------------------------------------------------------------------------
-- The .txt notation, parsed into the Lua value the decoder gives

local function unhex(tok)
  assert(tok:sub(1, 1) == "x", "hex token expected: " .. tok)
  return (tok:sub(2):gsub("..", function(h) return string.char(tonumber(h, 16)) end))
end

local function u64(tok) -- unsigned decimal -> the same 64 bits as a Lua integer
  assert(tok:match("^%d+$"), "unsigned decimal expected: " .. tok)
  local v = 0
  for d in tok:gmatch("%d") do v = v * 10 + tonumber(d) end -- integer arithmetic wraps
  return v
end

local function int(tok, na)
  if tok == "na" then return na end
  return assert(math.tointeger(tonumber(tok)), "integer expected: " .. tok)
end

local function f64_bits(h) return (string.unpack("<d", string.pack("<i8", tonumber(h, 16)))) end
local function f32_bits(h) return (string.unpack("<f", string.pack("<I4", tonumber(h, 16)))) end

local function float(tok, f32)
  if tok == "inf" then return math.huge end
  if tok == "-inf" then return -math.huge end
  if tok == "nan" then return f32 and f32_bits("7fc00000") or f64_bits("7ff8000000000000") end
  if tok == "na" then
    assert(not f32, "f32 has no NA")
    return f64_bits("7ff00000000007a2")
  end
  local payload = tok:match("^nan:(%x+)$")
  if payload then return f32 and f32_bits(payload) or f64_bits(payload) end
  local v = assert(tonumber(tok), "number expected: " .. tok)
  assert(math.type(v) == "float", "hex float expected: " .. tok)
  return v
end

local element = {
  f64 = function(t) return float(t[1]) end,
  f32 = function(t) return float(t[1], true) end,
  i64 = function(t) return int(t[1], math.mininteger) end,
  i32 = function(t) return int(t[1], -2147483648) end,
  u8 = function(t) return int(t[1]) end,
  bool = function(t)
    if t[1] == "na" then return suiro.NA end
    assert(t[1] == "true" or t[1] == "false", t[1])
    return t[1] == "true"
  end,
  c128 = function(t) return { re = float(t[1]), im = float(t[2]) } end,
}

local function split(line)
  local t = {}
  for tok in line:gmatch("[^ ]+") do t[#t + 1] = tok end
  return t
end

local function parse(text)
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do
    if line:sub(1, 1) ~= "#" then lines[#lines + 1] = line end
  end
  local pos = 0
  local containers = {} -- list, dict and func values by ordinal (for backref)

  local function next_tokens()
    pos = pos + 1
    return split(assert(lines[pos], "unexpected end of the notation"))
  end

  local function str_line()
    local t = next_tokens()
    assert(t[1] == "str", "str line expected, got " .. t[1])
    return unhex(t[2])
  end

  local function elements(ty, n)
    local a = suiro.array(ty, n)
    for i = 1, n do
      local t = next_tokens()
      a[i] = element[ty](t)
    end
    return a
  end

  local value

  local function strs(n)
    local s = { n = n }
    for i = 1, n do
      local tok = next_tokens()[1]
      s[i] = tok == "na" and suiro.NA or unhex(tok)
    end
    return suiro.strings(s)
  end

  local parsers = {
    ["nil"] = function() return nil end,
    bool = function(t) return element.bool { t[2] } end,
    i64 = function(t) return int(t[2], math.mininteger) end,
    f64 = function(t) return float(t[2]) end,
    str = function(t) return unhex(t[2]) end,
    bytes = function(t) return suiro.bytes(unhex(t[2])) end,
    array = function(t) return elements(t[2], tonumber(t[3])) end,
    ndarray = function(t)
      local dims, n = {}, 1
      for d = 1, tonumber(t[4]) do
        dims[d] = tonumber(t[4 + d])
        n = n * dims[d]
      end
      return elements(t[2], n):reshape(dims, t[3])
    end,
    strs = function(t) return strs(tonumber(t[2])) end,
    list = function(t)
      local l, n, holes = {}, tonumber(t[2]), false
      containers[#containers + 1] = l
      for i = 1, n do
        l[i] = value()
        if l[i] == nil then holes = true end
      end
      if holes then l.n = n end -- the decoder keeps the length of a list with holes
      return l
    end,
    dict = function(t)
      local d, keys = {}, {}
      containers[#containers + 1] = d
      for i = 1, tonumber(t[2]) do
        keys[i] = str_line()
        d[keys[i]] = value()
      end
      return suiro.dict(d, keys)
    end,
    frame = function(t)
      local spec = { nrow = tonumber(t[3]) }
      for i = 1, tonumber(t[2]) do spec[i] = { str_line(), value() } end
      return suiro.frame(spec)
    end,
    factor = function(t)
      local codes = suiro.i32(tonumber(t[3]))
      for i = 1, #codes do codes[i] = int(next_tokens()[1], -1) end
      local lt = next_tokens()
      assert(lt[1] == "strs")
      return suiro.factor(codes, { levels = strs(tonumber(lt[2])), ordered = t[2] == "ordered" })
    end,
    date = function(t) return suiro.date(elements(t[2], tonumber(t[3]))) end,
    timestamp = function(t)
      local tz = str_line()
      return suiro.timestamp(elements(t[2], tonumber(t[4])), { unit = t[3], tz = tz })
    end,
    error = function(t)
      local index = int(t[2])
      local e = { class = str_line(), message = str_line(), traceback = str_line() }
      if index >= 0 then e.index = index + 1 end -- 1-based in Lua
      return setmetatable(e, suiro.error_mt)
    end,
    call = function(t)
      local target = str_line()
      local spec = t[2] == "name" and suiro.call { target } or suiro.call { source = target }
      spec.args = value()
      spec.args.n = spec.args.n or #spec.args
      spec.named = value()
      spec.nnamed = 0
      for _ in pairs(spec.named) do spec.nnamed = spec.nnamed + 1 end
      return spec
    end,
    ref = function(t)
      local shape = {}
      for d = 1, tonumber(t[7]) do shape[d] = tonumber(t[7 + d]) end
      return suiro.wire.ref {
        type = t[2], order = t[3], flags = u64(t[4]), offset = u64(t[5]), length = u64(t[6]), shape = shape,
        name = str_line(),
      }
    end,
    func = function(t)
      local n = tonumber(t[4])
      local f = suiro.wire.func { lang = t[2], key = u64(t[3]), captured = { n = n - 1 } }
      containers[#containers + 1] = f
      f.name = value()
      for i = 1, n - 1 do f.captured[i] = value() end
      return f
    end,
    backref = function(t) return assert(containers[tonumber(t[2]) + 1], "backref to a later container") end,
    range = function(t)
      local start, step, n = math.tointeger(tonumber(t[2])), math.tointeger(tonumber(t[3])), tonumber(t[4])
      return suiro.range(start, start + (n - 1) * step, step)
    end,
  }

  function value()
    local t = next_tokens()
    return assert(parsers[t[1]], "unknown keyword " .. t[1])(t)
  end

  local v = value()
  assert(pos == #lines, "lines after the value")
  return v
end

---------------------------------------------------------------------------------------------------
-- Deep, bit-exact comparison

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
  elseif kx == "suiro.range" then
    return #x == #y and x.start == y.start and x.step == y.step, ("%s: %s vs %s"):format(path, tostring(x), tostring(y))
  elseif kx == "suiro.bytes" then
    return x == y and x:string() == y:string(), path .. ": bytes differ"
  elseif kx == "suiro.array" then
    local ok = x == y and x:kind() == y:kind() and x:type() == y:type() and x:order() == y:order()
    return ok, ("%s: %s vs %s"):format(path, tostring(x), tostring(y))
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
  -- tables: the same metatable, the same keys (raw), the same values; records the same key order
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

local function assert_same(want, got)
  local ok, why = same(want, got, "value", {})
  assert(ok, why)
end

---------------------------------------------------------------------------------------------------

local names = vector_names()

describe("golden vectors", function()
  it("are all here", function()
    assert.is_true(#names >= 60, "found " .. #names .. " vectors in " .. DIR)
  end)

  for _, name in ipairs(names) do
    it(name .. " decodes to its .txt value, and both encode to its bytes", function()
      local bin = read(DIR .. name .. ".bin")
      local want = parse(read(DIR .. name .. ".txt"))
      local got = suiro.wire.decode(bin, { describe = true })
      assert_same(want, got)
      assert.are.equal(hex(bin), hex(suiro.wire.encode(got)))
      assert.are.equal(hex(bin), hex(suiro.wire.encode(want)))
      -- without the option only references and functions are different (they need a region or
      -- a worker to become a value)
      local ok, plain = pcall(suiro.wire.decode, bin)
      if ok then
        assert_same(want, plain)
      else
        assert.matches("^cannot decode value: ", plain)
        assert.matches("^[rft][eua][fns]", name) -- ref_*, func_*, task_func
      end
    end)
  end

  it("every truncation fails with an error naming a byte", function()
    for _, name in ipairs(names) do
      local bin = read(DIR .. name .. ".bin")
      for len = 0, #bin - 1 do
        local ok, err = pcall(suiro.wire.decode, bin:sub(1, len), { describe = true })
        assert(not ok, name .. " truncated to " .. len .. " bytes decoded")
        assert(tostring(err):match("^cannot decode value: wire: .* at byte %d+$"), name .. ": " .. tostring(err))
      end
    end
  end)

  it("corrupted bytes fail cleanly, or decode to a value that encodes back to them", function()
    local checked = 0
    for _, name in ipairs(names) do
      local bin = read(DIR .. name .. ".bin")
      for i = 1, #bin do
        for _, x in ipairs { 0x01, 0x80, 0xff } do
          local bad = bin:sub(1, i - 1) .. string.char(bin:byte(i) ~ x) .. bin:sub(i + 1)
          local ok, v = pcall(suiro.wire.decode, bad, { describe = true })
          if ok then
            assert.are.equal(hex(bad), hex(suiro.wire.encode(v)), name .. " with byte " .. i .. " changed")
          else
            assert(tostring(v):match("^cannot decode value: "), v)
          end
          checked = checked + 1
        end
      end
    end
    assert.is_true(checked > 1000)
  end)

  it("random buffers fail cleanly, or decode to a value that encodes back to them", function()
    math.randomseed(20261130)
    local valid = 0
    for _ = 1, 5000 do
      local parts = { "SUIRO\1\0\0" }
      for _ = 1, math.random(1, 10) do
        if math.random() < 0.6 then -- a header word with a plausible tag, aux and count
          parts[#parts + 1] = string.pack("<BBI6", math.random(1, 21), math.random() < 0.6 and 0 or math.random(0, 7),
            math.random(0, 3))
        else
          parts[#parts + 1] = string.pack("<i8", math.random() < 0.5 and 0 or math.random(-1, 16))
        end
      end
      local buf = table.concat(parts)
      local ok, v = pcall(suiro.wire.decode, buf, { describe = true })
      if ok then
        valid = valid + 1
        assert.are.equal(hex(buf), hex(suiro.wire.encode(v)))
      else
        assert(tostring(v):match("^cannot decode value: "), v)
      end
    end
    assert.is_true(valid > 20)
  end)
end)

describe("suiro.wire", function()
  it("round-trips values built in Lua", function()
    local v = {
      1, 2.5, "x", true, suiro.NA, suiro.bytes "\0\1",
      suiro.strings { "a", suiro.NA }, suiro.dict { { "z", 1 }, { "a", 2 } },
      suiro.f64 { 1, 2, 3, 4, 5, 6 }:reshape({ 2, 3 }, "F"),
      suiro.factor({ "b", "a", suiro.NA }, { ordered = true }),
      suiro.date { 0, 1 }, suiro.timestamp({ 1, 2 }, { unit = "ms", tz = "UTC" }),
      suiro.frame { { "x", { 1, 2 } }, { "s", { "a", "b" } } },
    }
    local back = suiro.wire.decode(suiro.wire.encode(v))
    assert_same(v, back)
    assert.are.equal(suiro.wire.encode(v), suiro.wire.encode(back))
  end)

  it("keeps the key order of a decoded record, and of one built with suiro.dict", function()
    local d = suiro.dict { { "name", "ada" }, { "age", 36 }, { "empty" } }
    assert.are.same({ "name", "age", "empty" }, suiro.keys(d))
    assert.are.same({ "name", "age", "empty" }, suiro.keys(suiro.wire.decode(suiro.wire.encode(d))))
    d.added = true      -- new keys follow, sorted
    d.name = nil        -- a removed key is not sent
    assert.are.same({ "age", "empty", "added" }, suiro.keys(d))
    assert.are.same({ "a", "b" }, suiro.keys { b = 1, a = 2 }) -- a plain table: sorted
    assert.are.equal("table", type(suiro.wire.decode(suiro.wire.encode(suiro.dict {}))))
    -- {} and { n = 1 } stay records when they came as records
    local empty = suiro.wire.encode(suiro.dict {})
    assert.are.equal(empty, suiro.wire.encode(suiro.wire.decode(empty)))
    assert.are_not.equal(suiro.wire.encode {}, suiro.wire.encode(suiro.dict {}))
    assert.has_error(function() suiro.dict { { "a", 1 }, { "a", 2 } } end, 'suiro.dict: key "a" appears twice')
    assert.has_error(function() suiro.dict { { 1, 2 } } end,
      "suiro.dict: the key of entry 1 must be a string, got number")
  end)

  it("decodes references and functions to descriptors only when asked", function()
    local bin = read(DIR .. "func_proto.bin")
    assert.has_error(function() suiro.wire.decode(bin) end,
      "cannot decode value: a function arrived where none can run (at byte 8)")
    local f = suiro.wire.decode(bin, { describe = true })
    assert.are.equal("lua", f.lang)
    assert.are.equal("fedcba9876543210", ("%016x"):format(f.key))
    assert.are.equal(10, f.captured[1])
    assert.matches("^suiro.wire.func%(lua fedcba9876543210, 2 captured%)$", tostring(f))
    local r = suiro.wire.decode(read(DIR .. "ref_f64_2d.bin"), { describe = true })
    assert.are.same({ 1000, 10 }, r.shape)
    assert.are.equal("F", r.order)
    assert.are.equal("suiro.wire.ref(f64 [1000x10] F, 80000 bytes at 4096 in /suiro_1234_5678_9)", tostring(r))
  end)

  it("has the limits docs/api.md names: repeated dict keys, more than 8 dimensions", function()
    local function item(tag, aux, n) return string.pack("<BBi6", tag, aux, n) end
    local header = "SUIRO\1\0\0"
    local key = item(0x06, 0, 1) .. "a" .. ("\0"):rep(7)
    local dup = header .. item(0x0C, 0, 2) .. key .. item(0x03, 0, 1) .. key .. item(0x03, 0, 2)
    assert.are.same({ a = 2 }, suiro.wire.decode(dup))
    local nd9 = header .. item(0x09, 1, 9) .. string.pack("<I8", 0) .. string.pack("<I8", 1):rep(9) ..
      string.pack("<d", 1.5)
    assert.has_error(function() suiro.wire.decode(nd9) end,
      "cannot decode value: an array of 9 dimensions at byte 8 (suiro.array has at most 8)")
  end)

  it("names the byte of malformed input and the part of a value that cannot be sent", function()
    assert.has_error(function() suiro.wire.decode("junk") end,
      "cannot decode value: wire: truncated: 4 bytes, a buffer starts with an 8-byte header at byte 4")
    local bin = read(DIR .. "list_mixed.bin")
    local bad = bin:sub(1, 16) .. "\x3f" .. bin:sub(18)
    assert.has_error(function() suiro.wire.decode(bad) end, "cannot decode value: wire: bad tag 0x3f at byte 16")
    assert.has_error(function() suiro.wire.decode(bin, { descibe = true }) end,
      "suiro.wire.decode: unknown option descibe (options: describe)")
    assert.has_error(function() suiro.wire.encode { 1, { f = io.stdout } } end,
      "wire.encode: value[2].f: userdata (FILE*) cannot be sent")
    assert.has_error(function() suiro.wire.encode(function() end) end,
      "wire.encode: value: a function cannot be sent here")
    assert.has_error(function()
      suiro.wire.encode(suiro.wire.ref { name = "", type = "f64", offset = 0, length = 8 })
    end)
  end)
end)
