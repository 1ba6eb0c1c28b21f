-- The hostile battery's harness (issue 8, acceptance 2): bad input through the public Lua API.
--
-- Cases live in modules tests/lua/hostile/<group>.lua, each a list of
--   { name = "...", run = function(E) ... end, expect = <checker>, deadline = seconds, alone = bool }
-- made from tables (one entry per bad value), so every case is one busted `it`.
--
-- Cases never run in the busted process: a child process (`suiro run tests/lua/hostile_child.lua`,
-- the same build as the specs: the ASan one under scripts/test's lua-asan suite) runs a group of
-- them in order under tests/lua/hostile_watch.sh, which kills it when a case overruns its deadline.
-- The child prints each case's outcome, normalised to plain data; the spec checks it here. A case
-- that crashed its child, hung, or left a sanitizer report in its stretch of the child's stderr
-- fails with what was seen, and the next child resumes after it. `alone` cases get a child of
-- their own (they stop pools, kill workers, or may take the process down).
--
-- Set HOSTILE_REPORT=file to have every failure appended there (markdown), and HOSTILE_ONLY=pattern
-- to run only the cases whose name contains pattern (plain text).
local H = {}

---------------------------------------------------------------------------------------------------
-- Outcomes: { ok = bool, n = number of values, v = { normalised values } } where a failed call has
-- v[1] = the error. Normalised values are plain data that survive printing as Lua source:
--   nil, booleans, strings, integers and floats (kept apart), and tables; an error object becomes
--   { __error = true, class =, message =, index =, slot =, pid =, traceback =, value = }, other
--   userdata { __ud = tostring(v), __name = its metatable's __name }, suiro.NA { __na = true },
--   functions { __fn = true }, coroutines { __co = true }, a table seen again { __cycle = true }.

local function is_error_obj(v)
  local ok, suiro = pcall(require, "suiro")
  return ok and suiro.is_error and suiro.is_error(v)
end

function H.normalise(v, depth, seen)
  depth = depth or 0
  seen = seen or {}
  local t = type(v)
  if t == "nil" or t == "boolean" or t == "string" or t == "number" then return v end
  if t == "function" then return { __fn = true } end
  if t == "thread" then return { __co = true } end
  if depth > 12 then return { __deep = true } end
  if is_error_obj(v) then
    local e = { __error = true }
    for _, k in ipairs { "class", "message", "index", "slot", "pid", "traceback" } do
      local x = rawget(v, k)
      if x ~= nil then e[k] = H.normalise(x, depth + 1, seen) end
    end
    for k, x in pairs(v) do -- anything else the error carries (a thrown table, ...)
      if type(k) == "string" and e[k] == nil then e[k] = H.normalise(x, depth + 1, seen) end
    end
    return e
  end
  if t == "userdata" then
    local ok, suiro = pcall(require, "suiro")
    if ok and v == suiro.NA then return { __na = true } end
    local mt = getmetatable(v)
    local name = type(mt) == "table" and rawget(mt, "__name") or nil
    local okt, s = pcall(tostring, v)
    return { __ud = okt and s or "?", __name = name }
  end
  if seen[v] then return { __cycle = true } end
  seen[v] = true
  local out = {}
  for k, x in pairs(v) do
    local nk = (type(k) == "string" or type(k) == "number" or type(k) == "boolean") and k or tostring(k)
    out[nk] = H.normalise(x, depth + 1, seen)
  end
  seen[v] = nil
  return out
end

-- Lua source for a normalised value, on one line.
local function ser(v)
  local t = type(v)
  if t == "nil" then return "nil" end
  if t == "boolean" then return tostring(v) end
  if t == "string" then
    -- a child's result travels as one line: long strings are cut (cases compare them themselves)
    if #v > 65536 then v = v:sub(1, 65536) .. ("...(cut: %d bytes)"):format(#v) end
    return (("%q"):format(v):gsub("\\\n", "\\n"):gsub("\r", "\\r"))
  end
  if t == "number" then
    if math.type(v) == "integer" then
      if v == math.mininteger then return "math.mininteger" end
      return ("%d"):format(v)
    end
    if v ~= v then return "(0/0)" end
    if v == math.huge then return "math.huge" end
    if v == -math.huge then return "(-math.huge)" end
    return ("%a"):format(v)
  end
  local parts = {}
  for k, x in pairs(v) do parts[#parts + 1] = "[" .. ser(k) .. "]=" .. ser(x) end
  table.sort(parts)
  return "{" .. table.concat(parts, ",") .. "}"
end
H.serialise = ser

function H.outcome(ok, ...)
  local n = select("#", ...)
  local v = {}
  for i = 1, n do v[i] = H.normalise((select(i, ...))) end
  return { ok = ok, n = n, v = v }
end

-- A short human description of an outcome.
local function show(o)
  if not o then return "(no outcome)" end
  local s = ser(o.v)
  if #s > 1500 then s = s:sub(1, 1500) .. "...(cut)" end
  return (o.ok and "returned " or "raised ") .. o.n .. " value(s): " .. s ..
    (o.seconds and (" (in %.3f s)"):format(o.seconds) or "")
end
H.show = show

---------------------------------------------------------------------------------------------------
-- Checkers: functions (outcome) -> true, or false and what was wrong; each has a `what` text.

local function checker(what, f) return setmetatable({ what = what }, { __call = function(_, o) return f(o) end }) end
H.checker = checker

local function plain_has(s, pat) return type(s) == "string" and s:find(pat, 1, true) ~= nil end

-- Misuse errors point at the caller's line, never at suiro's own Lua files (issue 8, item 15).
local INTERNAL = { "suiro/init.lua:", "suiro/config.lua:", "suiro/parse.lua:", "[C]:" }

local function message_of(e)
  if type(e) == "string" then return e end
  if type(e) == "table" and e.__error then return e.message end
  return nil
end

--- raises(p1, p2, ...): a plain error message (not an error object) containing every pi (plain
--- text), located at the caller's line rather than inside suiro's Lua files.
function H.raises(...)
  local pats = { ... }
  local opts = type(pats[#pats]) == "table" and table.remove(pats) or {}
  return checker("raises an error containing " .. ser(pats), function(o)
    if o.ok then return false, "expected an error" end
    local e = o.v[1]
    if type(e) ~= "string" then return false, "expected a message, got " .. ser(e) end
    for _, p in ipairs(pats) do
      if not plain_has(e, p) then return false, "message lacks " .. ser(p) end
    end
    if not opts.anywhere then
      for _, p in ipairs(INTERNAL) do
        if plain_has(e, p) then return false, "message points inside suiro (" .. p .. "), not at the caller" end
      end
    end
    for _, p in ipairs(opts.never or {}) do
      if plain_has(e, p) then return false, "message contains " .. ser(p) end
    end
    return true
  end)
end

--- raises_any(p1, p2, ...): an error (message or error object) containing at least one pi.
function H.raises_any(...)
  local pats = { ... }
  return checker("raises an error containing one of " .. ser(pats), function(o)
    if o.ok then return false, "expected an error" end
    local m = message_of(o.v[1])
    if not m then return false, "expected an error with a message, got " .. ser(o.v[1]) end
    for _, p in ipairs(pats) do
      if plain_has(m, p) then return true end
    end
    return false, "message has none of them"
  end)
end

--- raises_obj { class = , message = plain part, index = , fields = { k = v } }: an error object.
function H.raises_obj(spec)
  return checker("raises an error object " .. ser(spec), function(o)
    if o.ok then return false, "expected an error object" end
    local e = o.v[1]
    if type(e) ~= "table" or not e.__error then return false, "expected an error object, got " .. ser(e) end
    if spec.class and e.class ~= spec.class then return false, "class is " .. ser(e.class) end
    if spec.message and not plain_has(e.message, spec.message) then
      return false, "message lacks " .. ser(spec.message)
    end
    if spec.index ~= nil and e.index ~= spec.index then return false, "index is " .. ser(e.index) end
    for k, v in pairs(spec.fields or {}) do
      if v == true then
        if e[k] == nil then return false, "no field " .. k end
      elseif e[k] ~= v then
        return false, k .. " is " .. ser(e[k])
      end
    end
    for _, p in ipairs(spec.never or {}) do
      if plain_has(e.message, p) then return false, "message contains " .. ser(p) end
    end
    return true
  end)
end

local function deep_eq(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) == "number" then
    if math.type(a) ~= math.type(b) then return false end
    if a ~= a then return b ~= b end
    return a == b
  end
  if type(a) ~= "table" then return a == b end
  for k, v in pairs(a) do
    if not deep_eq(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end
H.deep_eq = deep_eq

--- returns(v1, v2, ...): the call returned exactly these values (deep, subtypes kept).
function H.returns(...)
  local want = H.outcome(true, ...)
  return checker("returns " .. ser(want.v) .. " (" .. want.n .. " values)", function(o)
    if not o.ok then return false, "it raised" end
    if o.n ~= want.n then return false, "it returned " .. o.n .. " values" end
    if not deep_eq(o.v, want.v) then return false, "different values" end
    return true
  end)
end

--- nil_why("timeout"): the call returned nil and that reason.
function H.nil_why(why)
  return checker(("returns nil, %q"):format(why), function(o)
    if not o.ok then return false, "it raised" end
    if o.v[1] ~= nil or o.v[2] ~= why or o.n ~= 2 then return false, "different values" end
    return true
  end)
end

--- truthy(): the case's own checks passed: it returned true (and nothing else, or a note).
function H.passes()
  return checker("the case's own checks pass (returns true)", function(o)
    if not o.ok then return false, "it raised" end
    if o.v[1] ~= true then return false, "the case found: " .. ser(o.v[2] or o.v[1]) end
    return true
  end)
end

--- any_of(c1, c2, ...): one of the checkers passes.
function H.any_of(...)
  local cs = { ... }
  local whats = {}
  for i, c in ipairs(cs) do whats[i] = c.what end
  return checker(table.concat(whats, ", or "), function(o)
    local why = {}
    for _, c in ipairs(cs) do
      local ok, w = c(o)
      if ok then return true end
      why[#why + 1] = w
    end
    return false, table.concat(why, "; ")
  end)
end

--- closed_or(pats...): nil, "closed", or an error naming one of pats (a handle of a stopped pool).
function H.closed_or(...)
  return H.any_of(H.nil_why("closed"), H.raises_any(...))
end

---------------------------------------------------------------------------------------------------
-- Running cases in child processes (the parent side)

local SAN_MARKS = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
  "UndefinedBehaviorSanitizer", "AddressSanitizer:DEADLYSIGNAL", "SUMMARY: AddressSanitizer" }

local function sanitizer_report(text)
  for _, m in ipairs(SAN_MARKS) do
    local at = text:find(m, 1, true)
    if at then
      local from = math.max(1, at - 200)
      return text:sub(from, from + 2500)
    end
  end
  return nil
end
H.sanitizer_report = sanitizer_report

local function child_exe()
  return os.getenv("SUIRO_WORKER_EXE") or "build/bin/suiro"
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- Splits the child's stderr at its case markers: index -> text.
local function split_stderr(text)
  local parts = {}
  local pos = 1
  local current = 0
  while true do
    local s, e, k = text:find("\n@@HOSTILE CASE (%d+)@@\n", pos)
    local chunk = text:sub(pos, (s or #text + 1) - 1)
    parts[current] = (parts[current] or "") .. chunk
    if not s then break end
    current = tonumber(k)
    pos = e + 1
  end
  return parts
end

-- Runs cases from..to of module `mod` in one child; fills results[i] for the cases it reached.
local function run_child(mod, from, to, results)
  local errf = os.tmpname()
  -- SUIRO_* and LC_* variables of the host must not reach workers (issue 8 item 17)
  local cmd = ("SUIRO_HOSTILE_LEAK=1 LC_HOSTILE_LEAK=1 tests/lua/hostile_watch.sh %s %s run "
    .. "tests/lua/hostile_child.lua %s %d %d"):format(errf, child_exe(), mod, from, to)
  local f = assert(io.popen(cmd, "r"))
  local begun, status, hung
  local t0 = os.time()
  for line in f:lines() do
    local k = line:match("^BEGIN (%d+) ")
    if k then begun = tonumber(k) end
    local rk, payload = line:match("^RESULT (%d+) (.*)$")
    if rk then
      local chunk = load("return " .. payload, "=result", "t", { math = math })
      local ok, o = pcall(chunk)
      results[tonumber(rk)] = ok and o
        or { ok = false, n = 1, v = { "(unreadable result: " .. payload:sub(1, 200) .. ")" } }
      results[tonumber(rk)].done = true
    end
    local hk = line:match("^HUNG (%d*)")
    if hk then hung = tonumber(hk) end
    local st = line:match("^EXIT (%d+)")
    if st then status = tonumber(st) end
  end
  f:close()
  local errs = split_stderr(read_file(errf))
  os.remove(errf)
  for i = from, to do
    if results[i] then results[i].stderr = errs[i] or "" end
  end
  -- the case the child was in when it stopped, if it never reported
  local stuck = begun and not (results[begun] and results[begun].done) and begun or nil
  if stuck then
    results[stuck] = {
      crashed = true, hung = hung == stuck, status = status,
      stderr = (errs[stuck] or "") .. (errs[0] or ""),
      seconds = os.time() - t0,
    }
  elseif not begun then
    results[from] = { crashed = true, status = status, stderr = errs[0] or "", nostart = true }
  end
  return stuck
end

local function report(line)
  local path = os.getenv("HOSTILE_REPORT")
  if not path then return end
  local f = io.open(path, "a")
  if f then
    f:write(line)
    f:close()
  end
end

--- H.spec(title, module, describe, it): one describe with one `it` per case of tests/lua/hostile/<module>.lua.
function H.spec(title, mod, describe, it)
  local cases = require("tests.lua.hostile." .. mod)
  local only = os.getenv("HOSTILE_ONLY")
  describe(title, function()
    local results = {}
    local function ensure(i)
      if results[i] then return end
      local last = i
      if not cases[i].alone then
        while last + 1 <= #cases and not cases[last + 1].alone and last - i < 80 do last = last + 1 end
      end
      if only then last = i end
      run_child(mod, i, last, results)
    end
    for i, c in ipairs(cases) do
      if not only or c.name:find(only, 1, true) then
        it(c.name, function()
          ensure(i)
          local r = results[i]
          local problem
          if not r or r.nostart then
            problem = "the child process did not start the case (exit " .. tostring(r and r.status) .. ")"
          elseif r.crashed then
            problem = (r.hung and ("HUNG: no outcome within its deadline (%s s), killed"):format(c.deadline or 20)
              or ("CRASHED: the child process died (exit status " .. tostring(r.status) .. ")"))
          else
            local ok, why = c.expect(r)
            if not ok then
              problem = "expected: " .. c.expect.what .. "\n  got: " .. show(r) .. "\n  (" .. tostring(why) .. ")"
            end
          end
          local san = r and r.stderr and sanitizer_report(r.stderr)
          if san then problem = (problem and problem .. "\n" or "") .. "SANITIZER REPORT:\n" .. san end
          if problem then
            local tail = r and r.stderr and r.stderr ~= "" and not san and r.stderr:sub(-1500) or nil
            if tail and (r.crashed or r.nostart) then problem = problem .. "\n  stderr: " .. tail end
            report(("### %s / %s\n%s\n\n"):format(title, c.name, problem))
            error(problem, 0)
          end
        end)
      end
    end
  end)
end

return H
