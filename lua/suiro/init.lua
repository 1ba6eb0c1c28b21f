-- suiro: pools of worker processes for Lua scripts, over shared memory.
--
--   local suiro = require "suiro"
--   local pool <close> = suiro.pool { workers = 2 }
--   print(pool:submit(function(x, y) return x + y end, 1, 2):collect())   --> 3
--
-- This file is the public Lua API. The engine and the value codec live in the C module
-- suiro.core; the small languages of config scripts (durations, sizes, templates, function
-- references) live in suiro.parse, loaded on first use so that workers start fast.

local core = require "suiro.core"

local M = {
  version = core.version,
  now = core.now,
  current_pool = core.current_pool,
  reap = core.reap,
}

local here = debug.getinfo(1, "S").source:sub(2) -- this file, as positions name it

-- The config readers every face shares (suiro.parse, suiro.config) live in engine/conf of a
-- checkout, not next to this file; installed, they sit beside it and the usual searchers find
-- them first. This searcher, tried last, finds the checkout's copy.
do
  local root = here:match("^(.-)lua/suiro/init%.lua$")
  if root then
    package.searchers[#package.searchers + 1] = function(name)
      local leaf = name:match("^suiro%.(%a+)$")
      if leaf ~= "parse" and leaf ~= "config" then return nil end
      local path = root .. "engine/conf/suiro/" .. leaf .. ".lua"
      local f = io.open(path)
      if not f then return "\n\tno file '" .. path .. "'" end
      f:close()
      return assert(loadfile(path)), path
    end
  end
end
local function checked(f, ...)
  local ok, v = pcall(f, ...)
  if not ok then
    -- a message raised by the core on our behalf names this file: the user's line is what counts
    if type(v) == "string" and v:sub(1, #here) == here then v = v:gsub("^[^\n]-:%d+: ", "", 1) end
    error(v, 3)
  end
  return v
end

local pool_methods = core.pool_methods
local task_methods = core.task_methods

-- typed arrays: suiro.array(type, n), suiro.f64 {...}, suiro.i32 {...}, ...; and arrays of a
-- kind: suiro.date, suiro.timestamp, suiro.factor
for name, ctor in pairs(core.array) do M[name] = ctor end

-- >>> wire values (lua/lvalues.c, lua/lframe.c; docs/api.md "What crosses")
M.NA = core.NA             -- the missing value: BOOL NA, NA in string vectors, bool arrays, factors
M.bytes = core.bytes       -- suiro.bytes(s): binary data (wire BYTES)
M.strings = core.strings   -- suiro.strings { "a", suiro.NA }: a string vector (STRS)
M.dict = core.dict         -- suiro.dict { { "b", 1 }, { "a", 2 } }: a record with its key order
M.keys = core.keys         -- suiro.keys(t): the keys of a record in the order they are sent
-- suiro.frame: a data frame (FRAME). Three spellings:
--   suiro.frame { { "x", column }, { "y", column }, nrow = N }   pairs, in order
--   suiro.frame { names = { "x", "y" }, columns = { cx, cy } }   names and columns side by side
--   suiro.frame { x = cx, y = cy }                               by name (columns sorted by name)
-- and suiro.frame(names, columns_by_name).
local function frame(spec, by_name)
  if by_name ~= nil or type(spec) ~= "table" then return core.frame(spec, by_name) end
  local names, columns = rawget(spec, "names"), rawget(spec, "columns")
  if names ~= nil and columns ~= nil and type(names) == "table" and type(columns) == "table" then
    for k in pairs(spec) do
      if k ~= "names" and k ~= "columns" then
        error(("suiro.frame: unexpected key %s next to names and columns"):format(tostring(k)), 2)
      end
    end
    if #names ~= #columns then
      error(("suiro.frame: %d names for %d columns"):format(#names, #columns), 2)
    end
    local pairs_ = {}
    for i = 1, #names do pairs_[i] = { names[i], columns[i] } end
    return core.frame(pairs_)
  end
  local keys, other = {}, false
  for k, v in pairs(spec) do
    if type(k) == "string" and k ~= "nrow" and (type(v) == "table" or type(v) == "userdata") then
      keys[#keys + 1] = k
    elseif k ~= "nrow" then
      other = true
    end
  end
  if other or #keys == 0 then return core.frame(spec) end -- pairs, or the core's own message
  table.sort(keys)
  return core.frame(keys, spec)
end
function M.frame(spec, by_name) return checked(frame, spec, by_name) end
--- suiro.wire: one value to a wire buffer and back (a debugging and interop aid)
M.wire = {
  encode = core.wire_encode, -- suiro.wire.encode(v) -> string
  decode = core.wire_decode, -- suiro.wire.decode(s [, { describe = true }]) -> v
  ref = core.wire_ref,       -- descriptor of a shared-memory reference (REF)
  func = core.wire_func,     -- descriptor of a function (FUNC)
}
-- <<< wire values

local AWAIT = setmetatable({}, { __name = "suiro.await" })
local managed = setmetatable({}, { __mode = "k" }) -- coroutines run by suiro.run

local parse_mod
local function parse()
  parse_mod = parse_mod or require "suiro.parse"
  return parse_mod
end

-- Seconds from a number or a duration string ("250ms", "2m"); nil stays nil.
local function seconds(v, what)
  if v == nil then return nil end
  if type(v) == "number" and v == v and v >= 0 then return v end
  if type(v) == "string" then
    local s, err = parse().try_duration(v)
    if s then return s end
    error(what .. ": " .. err, 0)
  end
  error(what .. " must be a number of seconds or a duration string, got " .. tostring(v), 0)
end

---------------------------------------------------------------------------------------------------
-- Launchers and pools (options are checked and normalised by suiro.config, which Python and R
-- use too)

local config_mod
local function config()
  config_mod = config_mod or require "suiro.config"
  return config_mod
end

-- Calls f(...) and re-raises its error at the caller of the API function (level 3: the user's
-- line), so a misuse names the script line, not this file.
--- suiro.lua { exe = path, argv = {...}, env = {...} } : Lua workers (the default).
function M.lua(opts) return checked(function() return config().launcher("lua", opts) end) end
--- suiro.python { python = path, env = {...} } : Python workers (needs the Python binding).
function M.python(opts) return checked(function() return config().launcher("python", opts) end) end
--- suiro.r { rscript = path, env = {...} } : R workers (needs the R binding).
function M.r(opts) return checked(function() return config().launcher("r", opts) end) end

-- Where this file is in a checkout (<checkout>/lua/suiro/init.lua), or nil when installed.
local function checkout_root()
  local src = debug.getinfo(1, "S").source:match("^@(.*)$") or ""
  if src == "lua/suiro/init.lua" then return "." end -- loaded with a relative path (busted)
  return src:match("^(.*)/lua/suiro/init%.lua$")
end
local function exists(path)
  local f = path and io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end

-- What this host knows of itself for suiro.config.launch, which resolves every kind's command by
-- the one rule of all hosts (launcher options, then SUIRO_WORKER_EXE / SUIRO_PY_WORKER /
-- SUIRO_R_LIBS, then these, then what is installed): the suiro program next to this module, the
-- checkout's Python worker script and R library, and Lua's search paths for the workers.
local function host_info(kind, pool_env)
  local root = checkout_root()
  local py = root and (root .. "/bindings/python/suiro/_worker.py")
  local rlib = root and (root .. "/build/R-lib")
  return {
    lang = "lua",
    worker_exe = kind == "lua" and core.worker_exe() or nil,
    py_worker = kind == "python" and exists(py) and py or nil,
    r_libs = kind == "r" and rlib and exists(rlib .. "/suiro/DESCRIPTION") and rlib or nil,
    lua_path = package.path,
    lua_cpath = package.cpath,
    pool_env = pool_env,
  }
end

-- The resolved pool of normalised options (suiro.config.pool_options): what core.pool takes
-- (exe, argv, env, sizes); the MPI tier sends it to the serving ranks, which start it in C.
local function pool_spec(o)
  local l = o.launcher
  local cmd = config().launch(l.kind, l, host_info(l.kind, o.env))
  return {
    workers = o.workers,
    max_workers = o.max_workers,
    ring_cap = o.ring_cap,
    slot_size = o.slot_size,
    result_slots = o.result_slots,
    result_size = o.result_size,
    respawn = o.respawn,
    start_timeout = o.start_timeout,
    timeout = o.timeout,
    name = o.name,
    lang = l.kind,
    exe = cmd.exe,
    argv = cmd.argv,
    env = cmd.env,
  }
end

-- Starts a pool from normalised options.
local function start_pool(o) return core.pool(pool_spec(o)) end

M._start_pool = start_pool -- the MPI tier starts the same pools on every host (suiro.mpi)
M._pool_spec = pool_spec

-- Starts a pool from normalised options: backend = "mpi" is the pool on every host of an MPI job
-- (suiro.mpi, docs/mpi.md); "local" (the default) is this host's pool. Errors name no file line.
local function start_any(o)
  local ok, p
  if o.backend == "mpi" then
    ok, p = pcall(require("suiro.mpi").pool, o, start_pool)
  else
    ok, p = pcall(start_pool, o)
  end
  if not ok then
    error(tostring(p):gsub("^[^\n]-:%d+: ", "", 1):gsub("^suiro.pool: ", "", 1):gsub("^pool: ", "", 1), 0)
  end
  return p
end

--- suiro.pool { workers = 2, launcher = suiro.lua{}, timeout = "30s", env = { K = "v" } }
function M.pool(opts)
  return checked(function()
    local o = config().pool_options(opts, "suiro.pool", "suiro.pool options")
    local ok, p = pcall(start_any, o)
    if not ok then error("suiro.pool: " .. tostring(p), 0) end
    return p
  end)
end

---------------------------------------------------------------------------------------------------
-- Maps

local map_keys = { template = true, seed = true, progress = true, timeout = true, stream = true }

local function map_spec(opts, verb)
  opts = opts or {}
  if type(opts) ~= "table" then error(verb .. ": options must be a table, got " .. type(opts), 0) end
  for k in pairs(opts) do
    if not map_keys[k] then parse().check_keys(opts, map_keys, verb .. " options") end
  end
  local progress = opts.progress
  if progress ~= nil and type(progress) ~= "boolean" and type(progress) ~= "function" then
    error(verb .. ": progress must be true or a function(done, n), got " .. type(progress), 0)
  end
  if opts.seed ~= nil and math.type(opts.seed) ~= "integer" then
    error(verb .. ": seed must be an integer, got " .. tostring(opts.seed), 0)
  end
  local template
  if opts.template ~= nil then
    if type(opts.template) ~= "string" then
      error(verb .. ": template must be a string such as \"f64\", got " .. type(opts.template), 0)
    end
    local t, err = parse().try_template(opts.template)
    if not t then error(verb .. ": template: " .. err, 0) end
    template = t
  end
  return {
    template = template,
    seed = opts.seed,
    stream = opts.stream and true or false,
    progress = progress,
    timeout_s = seconds(opts.timeout, verb .. ": timeout"),
  }
end

M._map_spec = map_spec -- the MPI tier checks map options the same way

--- pool:map(f, xs, { template = "f64", seed = 42, progress = true, timeout = "1m", stream = false })
--- xs: a table, a suiro.array or a suiro.range. Returns a map: m:collect(), m:results(), m:cancel().
function pool_methods:map(f, xs, opts)
  return checked(function() return core.map_new(self, f, xs, map_spec(opts, "pool:map")) end)
end

--- pool:map_prepare(f, xs, opts): stages f and xs once; pm:run([new_xs]) runs it, as often as wanted.
function pool_methods:map_prepare(f, xs, opts)
  return checked(function()
    local spec = map_spec(opts, "pool:map_prepare")
    spec.prepare = true
    return core.map_new(self, f, xs, spec)
  end)
end

--- suiro.range(a, b [, step]): the integers a..b, never materialised (a map input).
M.range = core.range
--- suiro.random([m [, n]]): math.random inside map elements, from the element's own stream when
--- the map has a seed (so results do not depend on worker count or scheduling).
M.random = core.random

--- task:await([timeout]), map:await([timeout]): inside suiro.run, yields until it is done (the
--- scheduler below resumes it); elsewhere the same as collect.
local function await(self, timeout)
  local co = coroutine.running()
  if managed[co] then
    if timeout ~= nil then timeout = checked(seconds, timeout, "await: timeout") end
    local res = table.pack(coroutine.yield(AWAIT, self, timeout))
    if res[1] then return table.unpack(res, 2, res.n) end
    error(res[2], 0)
  end
  local res = table.pack(pcall(self.collect, self, timeout))
  if not res[1] then
    local e = res[2]
    if type(e) == "string" and e:sub(1, #here) == here then e = e:gsub("^[^\n]-:%d+: ", "", 1) end
    error(e, 2)
  end
  return table.unpack(res, 2, res.n)
end
core.map_methods.await = await

---------------------------------------------------------------------------------------------------
-- Channels (lua/lchan.c; docs/api.md "Channels")

--- suiro.channel { capacity = 1024, bytes = } -> tx, rx: a stream between two processes of the
--- pool family; an endpoint crosses in task arguments and results.
M.channel = core.channel
local channel_methods = core.channel_methods
local CHAN = {}
--- rx:await([timeout]): inside suiro.run, yields until a message (or the close, or the sender's
--- death) arrives, then answers as rx:recv(0) would; elsewhere the same as rx:recv(timeout).
function channel_methods.await(self, timeout)
  local co = coroutine.running()
  if managed[co] then
    if timeout ~= nil then timeout = checked(seconds, timeout, "await: timeout") end
    local res = table.pack(coroutine.yield(AWAIT, self, timeout, CHAN))
    if res[1] then return table.unpack(res, 2, res.n) end
    error(res[2], 0)
  end
  return self:recv(timeout)
end

---------------------------------------------------------------------------------------------------
-- Call specs

local call_mt = core.call_mt
call_mt.__name = "suiro.call"
call_mt.__index = call_mt
function call_mt:__tostring()
  local what = self.target and ("%q"):format(self.target) or "source"
  return ("suiro.call(%s, %d positional, %d named)"):format(what, #self.args, self.nnamed)
end

--- suiro.call { "mymod.fn", x, y, name = value } / suiro.call { source = "return a + b", a = 1 }
function M.call(spec)
  if type(spec) ~= "table" then error("suiro.call: argument must be a table, got " .. type(spec), 2) end
  local source = spec.source
  local target = source == nil and spec[1] or nil
  if source ~= nil and type(spec[1]) == "string" and spec[1]:match("^[%a_][%w_.:]*$") and spec[1]:find("[.:]") then
    error("suiro.call: give a function name or source, not both", 2)
  end
  if target == nil and source == nil then
    error('suiro.call: the first element must name a function ("mymod.fn"), or give source = "..."', 2)
  end
  if target ~= nil then
    if type(target) ~= "string" then
      error("suiro.call: the function name must be a string, got " .. type(target), 2)
    end
    parse().fnref(target) -- raises with the column on a malformed name
  elseif type(source) ~= "string" then
    error("suiro.call: source must be a string, got " .. type(source), 2)
  end
  local args, named, nnamed = {}, {}, 0
  local n = #spec
  for i = (target ~= nil) and 2 or 1, n do args[#args + 1] = spec[i] end
  args.n = #args
  for k, v in pairs(spec) do
    if type(k) == "string" then
      if k ~= "source" then named[k] = v; nnamed = nnamed + 1 end
    elseif math.type(k) ~= "integer" or k < 1 or k > n then
      error("suiro.call: unexpected key " .. tostring(k) .. " (named arguments need string keys)", 2)
    end
  end
  return setmetatable({ target = target, source = source, args = args, named = named, nnamed = nnamed }, call_mt)
end

---------------------------------------------------------------------------------------------------
-- Errors

M.error_mt = core.error_mt
--- true when v is an error object raised by a task (remote error, worker death, cancellation)
function M.is_error(v) return getmetatable(v) == core.error_mt end

---------------------------------------------------------------------------------------------------
-- Async: coroutines that await tasks, driven by the pools' eventfds

task_methods.await = await

local function pool_of(obj) return core.task_pool(obj) end

--- suiro.run(fn, ...) : runs fn as a coroutine; every await inside it (and in coroutines started
--- with suiro.spawn) yields to a scheduler that resumes it when its task completes. Returns
--- fn's results.
function M.run(fn, ...)
  if type(fn) ~= "function" then error("suiro.run: argument 1 must be a function, got " .. type(fn), 2) end
  local runnable = {}   -- { co, args packed }
  local waiting = {}    -- task -> { co = , deadline = }
  local nwaiting = 0
  local result
  local main = coroutine.create(fn)
  managed[main] = true
  runnable[1] = { main, table.pack(...) }

  local function step(co, args)
    local r = table.pack(coroutine.resume(co, table.unpack(args, 1, args.n)))
    if not r[1] then
      if co == main then error(r[2], 0) end
      error(r[2], 0) -- an error in a spawned coroutine surfaces too
    end
    if coroutine.status(co) == "dead" then
      if co == main then result = r end
      return
    end
    if r[2] == AWAIT then
      local task, timeout = r[3], r[4]
      waiting[task] = { co = co, deadline = timeout and (core.now() + seconds(timeout, "timeout")),
                        chan = r[5] == CHAN }
      nwaiting = nwaiting + 1
    else
      -- a plain yield (not an await): resume it again later with nothing
      runnable[#runnable + 1] = { co, table.pack() }
    end
  end

  local outer = M._spawn_hook -- a run inside a run: its coroutines are its own
  M._spawn_hook = function(f, ...)
    if type(f) ~= "function" then error("suiro.spawn: argument 1 must be a function, got " .. type(f), 3) end
    local co = coroutine.create(f)
    managed[co] = true
    runnable[#runnable + 1] = { co, table.pack(...) }
    return co
  end
  local function loop()
    while true do
      while #runnable > 0 do
        local batch = runnable
        runnable = {}
        for _, item in ipairs(batch) do step(item[1], item[2]) end
      end
      if nwaiting == 0 then break end
      -- Arm every pool's eventfd, then look for finished tasks; only then sleep on the fds.
      local pools, seen, chans = {}, {}, {}
      for task, w in pairs(waiting) do
        if w.chan then
          chans[#chans + 1] = task
        else
          local p = pool_of(task)
          if p and not seen[p] then seen[p] = true; pools[#pools + 1] = p end
        end
      end
      core.arm_events(pools)
      for _, rx in ipairs(chans) do rx:eventfd() end
      local progressed = false
      local now = core.now()
      local next_deadline = math.huge
      for task, w in pairs(waiting) do
        if task:ready() then
          waiting[task] = nil
          nwaiting = nwaiting - 1
          runnable[#runnable + 1] = { w.co, table.pack(pcall(w.chan and task.recv or task.collect, task, 0)) }
          progressed = true
        elseif w.deadline and now >= w.deadline then
          waiting[task] = nil
          nwaiting = nwaiting - 1
          runnable[#runnable + 1] = { w.co, table.pack(true, nil, "timeout") }
          progressed = true
        elseif w.deadline and w.deadline < next_deadline then
          next_deadline = w.deadline
        end
      end
      if not progressed then
        local wait = next_deadline == math.huge and -1 or math.max(0, next_deadline - now)
        if #chans > 0 then core.wait_any(pools, chans, wait) else core.wait_events(pools, wait) end
      end
    end
  end
  local ok, err = pcall(loop)
  M._spawn_hook = outer
  if not ok then error(err, 0) end
  return table.unpack(result, 2, result.n)
end

--- suiro.spawn(fn, ...) : inside suiro.run, starts fn as another coroutine of the scheduler.
function M.spawn(fn, ...)
  if not M._spawn_hook then error("suiro.spawn: only inside suiro.run", 2) end
  return M._spawn_hook(fn, ...)
end

---------------------------------------------------------------------------------------------------
-- Config scripts

--- suiro.open "pools.lua" : a config script returns { name = { workers =, launcher =, ... }, ... }.
--- Every pool is checked now (errors name the file, the pool and the key); each is created on
--- first use; closing the table stops them all.
function M.open(path)
  local loaded = checked(function()
    if type(path) ~= "string" then error("suiro.open: argument 1 must be a file name, got " .. type(path), 0) end
    local ok, a, b = pcall(config().load, path, setmetatable({ suiro = M }, { __index = _G }))
    if not ok then error("suiro.open: " .. tostring(a), 0) end
    return { a, b }
  end)
  local specs, names = loaded[1], loaded[2]
  local created = {}   -- name -> pool, in creation order for closing
  local set = {}
  local mt = {
    __index = function(t, name)
      local o = specs[name]
      if not o then
        error(('no pool "%s" in %s (pools: %s)'):format(tostring(name), path, table.concat(names, ", ")), 2)
      end
      local ok, p = pcall(start_any, o)
      if not ok then error(('%s: pool "%s": %s'):format(path, name, tostring(p)), 2) end
      created[#created + 1] = p
      rawset(t, name, p)
      return p
    end,
    __close = function()
      for i = #created, 1, -1 do created[i]:stop() end
    end,
  }
  mt.__gc = mt.__close
  return setmetatable(set, mt)
end

---------------------------------------------------------------------------------------------------
-- Doctor

--- suiro.doctor() : checks which launchers work here; prints a report, returns true when Lua works.
function M.doctor(out)
  out = out or io.stdout
  local ok_all = true
  local function line(ok, what, detail)
    out:write(("%-8s %-10s %s\n"):format(ok and "ok" or "missing", what, detail or ""))
  end
  local t0 = core.now()
  local ok, err = pcall(function()
    local p <close> = M.pool { workers = 1 }
    assert(p:submit(function(a, b) return a + b end, 1, 2):collect(5) == 3)
  end)
  line(ok, "lua", ok and ("workers start and run tasks (%.1f ms)"):format((core.now() - t0) * 1e3) or tostring(err))
  ok_all = ok_all and ok
  local function probe(cmd)
    local f = io.popen(cmd .. " 2>/dev/null")
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return s ~= "" and s or nil
  end
  local t1 = core.now()
  local okp, perr = pcall(function()
    local p <close> = M.pool { workers = 1, launcher = M.python {} }
    assert(p:submit(M.call { "operator.add", 1, 2 }):collect(10) == 3, "a call spec gave a wrong result")
  end)
  line(okp, "python", okp and ("workers start and run call specs (%.1f ms)"):format((core.now() - t1) * 1e3)
    or tostring(perr))
  local t2 = core.now()
  local okr, rerr = pcall(function()
    local p <close> = M.pool { workers = 1, launcher = M.r {} }
    assert(p:submit(M.call { "base::sum", 1, 2 }):collect(10) == 3, "a call spec gave a wrong result")
  end)
  local r = not okr and probe("Rscript -e 'cat(R.version.string)'")
  line(okr, "r", okr and ("workers start and run call specs (%.1f ms)"):format((core.now() - t2) * 1e3)
    or ((r and (r .. ": ") or "no Rscript on PATH: ") .. tostring(rerr)))
  -- the MPI tier (optional: its absence does not fail the doctor)
  local okc, okm, mdetail = pcall(function() return require("suiro.mpi").doctor() end)
  line(okc and okm, "mpi", okc and mdetail or tostring(okm))
  return ok_all
end

-- Under mpirun with stock lua5.4 (the suiro command does this before the script runs): rank 0
-- brings MPI up, the other ranks serve rank 0 and never return to the script.
package.loaded.suiro = M
if package.preload["suiro.core"] == nil and (tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "") or 1) > 1 then
  local mpi = require "suiro.mpi"
  if not mpi.serving then
    local code = mpi.cli_main()
    if code then os.exit(code, true) end
  end
end

return M
