-- suiro.parse: the small languages of suiro scripts and config files, as LPeg grammars
-- compiled once at load:
--
--   durations            "250ms", "1m30s", "1.5h", "inf"          -> seconds (float)
--   sizes                "256KiB", "10KB", "512"                   -> bytes (integer)
--   function references  "stats::quantile", "numpy.mean", "fn"    -> table
--   type templates       "f64", "f64[3]", "[str]", "{mean: f64}"   -> table
--
-- parse.X(s) returns the value or raises; parse.try_X(s) returns the value or nil, message.
-- Messages name what was parsed, quote the input and point at the problem:
--
--   bad duration "25 0ms": unexpected "0ms" at column 4
--       25 0ms
--          ^
--
-- parse.patterns.X are the same grammars as plain LPeg patterns (unanchored, one capture) for
-- building bigger grammars. The user-facing description is docs/config-strings.md.

local lpeg = require "lpeg"

local P, R, S, V = lpeg.P, lpeg.R, lpeg.S, lpeg.V
local C, Cc, Cp, Ct, Cmt, Carg = lpeg.C, lpeg.Cc, lpeg.Cp, lpeg.Ct, lpeg.Cmt, lpeg.Carg

local parse = {}

---------------------------------------------------------------------------------------------------
-- messages

local function quote(s)
  local q = ("%q"):format(s):gsub("\\\n", "\\n")
  if not utf8.len(s) then
    q = q:gsub("[\128-\255]", function(c) return ("\\x%02X"):format(c:byte()) end)
  end
  return q
end

local function width(s)          -- display columns: one per character, or per byte if not UTF-8
  return utf8.len(s) or #s
end

local function clip(s, n)        -- at most n characters, "..." marking a cut
  if width(s) <= n then return s end
  return s:sub(1, (utf8.len(s) and utf8.offset(s, n - 2) or n - 2) - 1) .. "..."
end

-- Optimal string alignment distance (Levenshtein plus adjacent transpositions).
local function distance(a, b)
  local d = {}
  for i = 0, #a do d[i] = { [0] = i } end
  for j = 1, #b do d[0][j] = j end
  for i = 1, #a do
    for j = 1, #b do
      local x, y = a:byte(i), b:byte(j)
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (x == y and 0 or 1))
      if i > 1 and j > 1 and x == b:byte(j - 1) and a:byte(i - 1) == y then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[#a][#b]
end

-- "did you mean X?" for the first of the sorted names within edit distance 2 of word, or nil
local function suggest(word, names)
  local best, bestd = nil, 3
  for _, name in ipairs(names) do
    local dist = distance(word, name)
    if dist < bestd then best, bestd = name, dist end
  end
  return best and ("did you mean %s?"):format(best)
end

-- The message for a failed match: st.why (a problem found by a check) at st.at, or else
-- whatever follows the farthest point the grammar reached (st.far).
local function report(what, s, st)
  local pos = st.at or st.far
  local lineno, first = 1, 1
  for nl in s:sub(1, pos - 1):gmatch("()\n") do lineno, first = lineno + 1, nl + 1 end
  local line = s:match("^[^\r\n]*", first)
  local utf = utf8.len(line) ~= nil
  local before = math.min(pos - first, #line)             -- bytes of the line before pos
  local col = (utf and utf8.len(line, 1, before) or before) + 1
  local why = st.why
  if not why then
    local rest = s:match("^[^\n]*", pos):match("^(.-)%s*$")
    if rest == "" then rest = s:sub(pos, pos) end
    why = "unexpected " .. (pos > #s and "end of input" or quote(clip(rest, 12)))
  end
  local where = s:find("\n") and ("line %d, column %d"):format(lineno, col) or "column " .. col
  -- the line again, one column per character, shifted left if the column is far right
  local echo = (utf and line or line:gsub("[\128-\255]", "?")):gsub("\t", " "):gsub("%c", "?")
  local shift = math.max(0, col - 40)
  if shift > 0 then echo = "..." .. echo:sub(utf8.offset(echo, shift + 4)) end
  return ("bad %s %s: %s at %s%s\n    %s\n    %s^"):format(what, quote(clip(s, 60)), why, where,
    st.hint and "; " .. st.hint or "", clip(echo, 76), (" "):rep(col - shift - 1))
end

---------------------------------------------------------------------------------------------------
-- values: functions from captures to values; those that can reject return nil, why[, pos, hint]

local huge, maxinteger, tointeger = math.huge, math.maxinteger, math.tointeger

local per_second = { ns = 1e9, us = 1e6, ["µs"] = 1e6, ["μs"] = 1e6, ms = 1e3 }
local in_seconds = { s = 1, m = 60, h = 3600, d = 86400 }

local function part(n, unit)
  local per = per_second[unit]
  if per then return n / per end
  return n * in_seconds[unit]
end

local function seconds(parts)
  if type(parts) == "number" then parts = { parts } end     -- a plain number
  local sum = 0.0
  for _, x in ipairs(parts) do sum = sum + x end
  if sum == huge then return nil, "number too large" end
  return sum
end

local size_units = {
  B = 1, KB = 1000, kB = 1000, MB = 1000000, GB = 1000000000, TB = 1000000000000,
  PB = 1000000000000000, KiB = 1 << 10, MiB = 1 << 20, GiB = 1 << 30, TiB = 1 << 40, PiB = 1 << 50,
}

local function gcd(a, b)
  while b ~= 0 do a, b = b, a % b end
  return a
end

-- Exact: the numeral is n / 10^#frac, so the size is n * mult / 10^#frac.
local function bytes(numeral, unit)
  local whole, frac = numeral:match("^(%d*)%.?(%d-)0*$")
  local n = tointeger(tonumber(whole .. frac))
  if not n or #frac > 18 then
    return nil, (whole == "" or tointeger(tonumber(whole))) and "too many digits" or "number too large"
  end
  local mult, scale = size_units[unit or "B"], tointeger(10 ^ #frac)
  local g = gcd(mult, scale)
  local m, q = mult // g, scale // g
  if n % q ~= 0 then return nil, "not a whole number of bytes" end
  if n // q > maxinteger // m then return nil, "number too large" end
  return n // q * m
end

local function r_ref(package, internal, name)
  return { lang = "r", package = package, name = name, internal = internal }
end

local function dotted_ref(path)
  local module = #path > 1 and table.concat(path, ".", 1, #path - 1) or nil
  return { lang = "dotted", module = module, name = path[#path], path = path }
end

local arrayable = { f64 = true, f32 = true, i64 = true, i32 = true, u8 = true, bool = true,
                    c128 = true, str = false, any = false }
local type_names = {}
for name in pairs(arrayable) do type_names[#type_names + 1] = name end
table.sort(type_names)

local function known_type(name)
  if arrayable[name] ~= nil then return name end
  return nil, "unknown type " .. quote(name), nil, suggest(name, type_names)
end

local function dimension(digits)
  local n = tointeger(tonumber(digits))
  if n and n > 0 then return n end
  return nil, n and "dimension must be at least 1" or "dimension too large"
end

local function scalar_or_array(t, at, shape)
  if not shape then return { kind = "scalar", type = t } end
  if not arrayable[t] then
    return nil, t .. " has no fixed-length array form", at, "use [" .. t .. "] for a list"
  end
  return { kind = "array", type = t, shape = shape }
end

local function field(at, name, t)
  return { name = name, type = t, at = at }
end

local function record(fields)
  local seen = {}
  for _, f in ipairs(fields) do
    if seen[f.name] then return nil, "duplicate field " .. quote(f.name), f.at end
    seen[f.name], f.at = true, nil
  end
  return { kind = "record", fields = fields }
end

local function list(t)
  return { kind = "list", of = t }
end

---------------------------------------------------------------------------------------------------
-- grammars

local digit = R"09"
local alpha = R("az", "AZ")
local ws = S" \t\r\n"^0
local numeral = digit^1 * ("." * digit^1)^-1 + "." * digit^1
local ident = (alpha + "_") * (alpha + digit + "_")^0                -- Python and Lua names
local rname = (alpha + "." * -digit) * (alpha + digit + S"._")^0     -- R names
local field_name = (alpha + "_") * (alpha + digit + S"_.")^0         -- also R's p.value
local time_unit = P"ns" + "us" + "µs" + "μs" + "ms" + S"smhd"
local size_unit = S"KMGTP" * P"i"^-1 * "B" + "kB" + "B"

-- With track, the patterns take a state table as extra argument: `mark` records in st.far how
-- far the match got, `check(patt, f)` turns patt's captures into f's value or records f's
-- problem in st (the first one wins). Without, they are plain patterns.
local function grammars(track)
  local mark, check
  if track then
    mark = Cmt(Carg(1), function(_, i, st)
      if i > st.far then st.far = i end
      return true
    end)
    check = function(patt, f)
      return Cmt(Carg(1) * Cp() * patt, function(_, i, st, at, ...)
        local v, why, pos, hint = f(...)
        if v ~= nil then return i, v end
        if not st.why then st.why, st.at, st.hint = why, pos or at, hint end
        return false
      end)
    end
  else
    mark = P(true)
    check = function(patt, f)
      return Cmt(patt, function(_, i, ...)
        local v = f(...)
        if v ~= nil then return i, v end
        return false
      end)
    end
  end
  local function tok(p) return ws * mark * p end

  local number = C(numeral) / tonumber
  local time_part = number * mark * C(time_unit) / part
  local dim = tok(check(C(digit^1), dimension))
  local shape = tok"[" * Ct(dim * (tok"," * dim)^0) * tok"]"

  local g = {
    duration = (P"inf" + "forever") * Cc(huge)
             + check(Ct(time_part * (mark * time_part)^0) + number, seconds),
    size = check(C(numeral) * mark * C(size_unit)^-1, bytes),
    fnref = C(rname) * (P":::" * Cc(true) + "::" * Cc(false)) * mark * C(rname) / r_ref
          + Ct(C(ident) * ("." * mark * C(ident))^0) / dotted_ref,
    template = P{ "template",
      template = V"record" + V"list" + V"scalar",
      record = check(tok"{" * Ct(V"field" * (tok"," * V"field")^0) * tok","^-1 * tok"}", record),
      field = tok(Cp() * C(field_name)) * tok":" * V"template" / field,
      list = tok"[" * V"template" * tok"]" / list,
      scalar = tok(check(check(C(ident), known_type) * (ws * Cp() * shape)^-1, scalar_or_array)),
    },
  }
  if track then
    for name, p in pairs(g) do g[name] = ws * mark * p * ws * mark * -1 end
  end
  return g
end

local anchored = grammars(true)
parse.patterns = grammars(false)

---------------------------------------------------------------------------------------------------
-- API

local function from_seconds(n)
  if n ~= n then return nil, "not a number" end
  if n < 0 then return nil, "negative" end
  return n + 0.0
end

local function from_bytes(n)
  if n ~= math.floor(n) then return nil, "not a whole number of bytes" end
  if n < 0 then return nil, "negative" end
  if n >= 2.0 ^ 63 then return nil, "number too large" end
  return tointeger(n)
end

-- parse.name and parse.try_name; from_number, if given, accepts Lua numbers
local function define(name, what, from_number)
  local function try(v)
    if from_number and type(v) == "number" then
      local x, why = from_number(v)
      if x == nil then return nil, ("bad %s %s: %s"):format(what, v, why) end
      return x
    end
    if type(v) ~= "string" then
      return nil, ("bad %s: expected a string%s, got %s"):format(what,
        from_number and " or a number" or "", type(v))
    end
    local st = { far = 1 }
    local ok, x = pcall(lpeg.match, anchored[name], v, 1, st)
    if ok and x ~= nil then return x end
    if not ok then
      if not tostring(x):find("stack overflow", 1, true) then error(x, 0) end
      st.why, st.at = "too deeply nested", st.far            -- past LPeg's backtrack limit
    end
    return nil, report(what, v, st)
  end
  parse["try_" .. name] = try
  parse[name] = function(v)
    local x, err = try(v)
    if x == nil then error(err, 0) end
    return x
  end
end

define("duration", "duration", from_seconds)
define("size", "size", from_bytes)
define("fnref", "function reference")
define("template", "template")

local function key_order(a, b)   -- string keys first, then by tostring
  local sa, sb = type(a) == "string", type(b) == "string"
  if sa ~= sb then return sa end
  return tostring(a) < tostring(b)
end

-- Raises unless every key of tbl is one of valid (a list of names, or a set: name -> true).
-- what says where tbl came from ('pool "fast"'). Returns tbl.
function parse.check_keys(tbl, valid, what)
  local args = { tbl, valid }
  for i = 1, 2 do
    if type(args[i]) ~= "table" then
      error(("bad argument #%d to 'check_keys' (table expected, got %s)"):format(i, type(args[i])), 2)
    end
  end
  local names, ok = {}, {}
  for k, v in pairs(valid) do
    local name = math.type(k) == "integer" and v or k
    if v and not ok[name] then ok[name] = true; names[#names + 1] = name end
  end
  table.sort(names)
  local unknown = {}
  for k in pairs(tbl) do
    if not ok[k] then unknown[#unknown + 1] = k end
  end
  if #unknown == 0 then return tbl end
  table.sort(unknown, key_order)
  local key = unknown[1]
  local hint = type(key) == "string" and suggest(key, names)
  error(("unknown key %s%s (valid keys: %s)%s"):format(
    type(key) == "string" and quote(key) or "[" .. tostring(key) .. "]",
    what and " in " .. what or "",
    #names > 0 and table.concat(names, ", ") or "none",
    hint and "; " .. hint or ""), 0)
end

return parse
