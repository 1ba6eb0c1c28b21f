-- suiro.config: pool options and config scripts, checked and normalised in one place.
--
-- Every face reads pools the same way: Lua through suiro.pool and suiro.open, Python and R through
-- the embedded Lua of engine/conf/conf.c, which calls config.load. The result is plain data:
--
--   { workers = 2, max_workers = 16, timeout = 30.0, start_timeout = 10.0, respawn = true,
--     env = { KEY = "value" }, launcher = { kind = "python", python = "/usr/bin/python3" },
--     slot_size = 512, result_size = 4096, ring_cap = 4096, result_slots = 131072, name = "x" }
--
-- (durations in seconds, sizes in bytes; absent options stay absent). Errors name the file, the
-- pool and the key:  pools.lua: pool "ingest": timeout: bad duration "1m30" ...

local parse = require "suiro.parse"

local config = {}

config.pool_keys = {
  workers = true, max_workers = true, launcher = true, timeout = true, start_timeout = true,
  env = true, respawn = true, ring_cap = true, slot_size = true, result_slots = true,
  result_size = true, name = true, backend = true,
}

-- Launcher options. Every launcher takes env (added to the workers' environment); the Lua
-- launcher takes exe and argv (the worker command), Python takes python (the interpreter),
-- R takes rscript.
config.launcher_keys = {
  lua = { env = true, exe = true, argv = true },
  python = { env = true, python = true, exe = true, argv = true },
  r = { env = true, rscript = true, exe = true, argv = true },
}

-- What every face adds to a worker's environment, under what the launcher's and the pool's env
-- give (theirs win): one thread for the numeric libraries a worker may load (a pool of N workers
-- on N cores must not start N x N threads), and a UTF-8 locale for R. The host adds
-- SUIRO_HOST_LANG (its own language) and its search paths.
config.thread_vars = {
  "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS",
  "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS",
}

--- config.worker_env(kind) -> { NAME = value }: the defaults for workers of that launcher kind.
function config.worker_env(kind)
  if not config.launcher_keys[kind] then
    error(('worker_env: launcher kind must be "lua", "python" or "r", got %s'):format(tostring(kind)), 0)
  end
  local env = {}
  for _, k in ipairs(config.thread_vars) do env[k] = "1" end
  if kind == "r" then env.LANG = "C.UTF-8" end
  return env
end

local launcher_mt = { __name = "suiro.launcher" }
launcher_mt.__index = launcher_mt
function launcher_mt:__tostring() return "suiro.launcher(" .. self.kind .. ")" end
config.launcher_mt = launcher_mt

local function fail(where, key, msg)
  error((where and (where .. ": ") or "") .. (key and (key .. ": ") or "") .. msg, 0)
end

local function check_env(env, where, key)
  if env == nil then return nil end
  if type(env) ~= "table" then fail(where, key, "must be a table of NAME = value, got " .. type(env)) end
  local out = {}
  for k, v in pairs(env) do
    if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
      fail(where, key, ("variable names are letters, digits and _, got %s"):format(
        type(k) == "string" and ("%q"):format(k) or tostring(k)))
    end
    local tv = type(v)
    if tv == "number" then
      v = math.type(v) == "integer" and ("%d"):format(v) or ("%.17g"):format(v)
    elseif tv == "boolean" then
      v = tostring(v)
    elseif tv ~= "string" then
      fail(where, key .. "." .. k, "must be a string, number or boolean, got " .. tv)
    end
    if v:find("\0", 1, true) then fail(where, key .. "." .. k, "contains a NUL byte") end
    out[k] = v
  end
  return out
end

local function check_strings(list, where, key)
  if list == nil then return nil end
  if type(list) ~= "table" then fail(where, key, "must be a list of strings, got " .. type(list)) end
  local out = {}
  for i, v in ipairs(list) do
    if type(v) ~= "string" then fail(where, ("%s[%d]"):format(key, i), "must be a string, got " .. type(v)) end
    if v:find("\0", 1, true) then fail(where, ("%s[%d]"):format(key, i), "contains a NUL byte") end
    out[i] = v
  end
  for k in pairs(list) do
    if math.type(k) ~= "integer" or k < 1 or k > #out then
      fail(where, key, "must be a list (keys 1..n), has key " .. tostring(k))
    end
  end
  return out
end

--- config.launcher(kind, opts, where) -> a launcher object (a table with kind and its options).
function config.launcher(kind, opts, where)
  where = where or ("suiro." .. kind)
  opts = opts or {}
  if type(opts) ~= "table" then fail(where, nil, "options must be a table, got " .. type(opts)) end
  local keys = config.launcher_keys[kind]
  parse.check_keys(opts, keys, "launcher " .. kind)
  local l = { kind = kind }
  for k, v in pairs(opts) do
    if k == "env" then l.env = check_env(v, where, "env")
    elseif k == "argv" then l.argv = check_strings(v, where, "argv")
    elseif type(v) ~= "string" or v == "" then fail(where, k, "must be a non-empty string (a path), got " .. type(v))
    else l[k] = v end
  end
  return setmetatable(l, launcher_mt)
end

-- >>> worker commands: config.launch
--
-- One rule for where each language's workers live, from every host. For each thing a launcher
-- needs (the program, its arguments, the package it runs) the first of these that says
-- something wins:
--   1. the launcher's own options: exe (python and rscript are its other names), argv, env;
--   2. the environment variable naming it: SUIRO_WORKER_EXE (Lua workers' program),
--      SUIRO_PY_WORKER (the Python worker script), SUIRO_R_LIBS (the R library holding suiro);
--   3. what the host knows of itself (host.worker_exe, host.py_worker, host.python, host.r_libs,
--      host.rscript: its package directory, its R library, the suiro program it found);
--   4. what is installed: suiro on PATH, python -I -m suiro._worker, R's own library path.
-- Environment, low to high: worker_env(kind) < what the host passes on (SUIRO_PYTHONPATH,
-- SUIRO_CWD, SUIRO_LUA_PATH/CPATH, R_LIBS) < the launcher's env < the pool's env; SUIRO_HOST_LANG
-- is always the host's language.

local probed = {} -- command -> whether it succeeded (asked once per process)
local function succeeds(cmd)
  if probed[cmd] == nil then
    local ok = os.execute(cmd .. " >/dev/null 2>&1")
    probed[cmd] = ok == true or ok == 0
  end
  return probed[cmd]
end
local function shell_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function exists(path)
  local f = path and io.open(path, "r")
  if f then f:close() end
  return f ~= nil
end
local function getenv(name)
  local v = os.getenv(name)
  if v ~= nil and v ~= "" then return v end
  return nil
end
-- A program's path: itself when it names a directory, else the first match on PATH (or nil).
local function on_path(prog)
  if prog:find("/", 1, true) then return exists(prog) and prog or nil end
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    if exists(dir .. "/" .. prog) then return dir .. "/" .. prog end
  end
  return nil
end
config._on_path = on_path

local host_langs = { lua = true, python = true, r = true }

--- config.launch(kind, opts, host) -> { exe = path, argv = { ... } or nil, env = { NAME = value } }:
--- the command and environment of workers of a launcher kind. opts: the launcher's options
--- (config.launcher's, with or without kind); host: { lang = "lua" | "python" | "r", and what it
--- knows: worker_exe, py_worker, python, r_libs, r_lib_path, rscript, pythonpath, cwd, lua_path,
--- lua_cpath; pool_env = the pool's env }. argv nil: the engine runs exe alone.
function config.launch(kind, opts, host)
  if not config.launcher_keys[kind] then
    error(('launch: launcher kind must be "lua", "python" or "r", got %s'):format(tostring(kind)), 0)
  end
  if type(host) ~= "table" or not host_langs[host.lang] then
    error("launch: host must be a table with lang = \"lua\", \"python\" or \"r\"", 0)
  end
  local o = {}
  for k, v in pairs(opts or {}) do if k ~= "kind" then o[k] = v end end
  local l = config.launcher(kind, o, "suiro." .. kind)
  local env = config.worker_env(kind)
  local exe
  local argv = l.argv
  if kind == "lua" then
    exe = l.exe or getenv("SUIRO_WORKER_EXE") or host.worker_exe or on_path("suiro")
    if not exe then
      error("the lua launcher cannot find the suiro worker program (build/bin/suiro of a checkout, suiro on "
        .. "PATH): build it with scripts/build, set SUIRO_WORKER_EXE, or give exe", 0)
    end
  elseif kind == "python" then
    exe = l.exe or l.python or host.python or "/usr/bin/python3"
    if not argv then
      local script = getenv("SUIRO_PY_WORKER")
      if script and not exists(script) then
        error("the python launcher: SUIRO_PY_WORKER names no file (" .. script .. ")", 0)
      end
      script = script or host.py_worker
      if script then
        argv = { exe, "-I", script }
      elseif succeeds(shell_quote(exe) .. " -I -c 'import suiro._worker'") then
        argv = { exe, "-I", "-m", "suiro._worker" }
      else
        error(("the python launcher needs suiro's Python package for %s (pip install it into that "
          .. "interpreter's environment, give python = one that has it, or set SUIRO_PY_WORKER)"):format(exe), 0)
      end
    end
    env.SUIRO_PYTHONPATH = host.pythonpath or getenv("PYTHONPATH")
    env.SUIRO_CWD = host.cwd
    if getenv("SUIRO_SANITIZED") and getenv("LD_PRELOAD") then env.LD_PRELOAD = getenv("LD_PRELOAD") end
  else -- r
    exe = l.exe or l.rscript or host.rscript or "Rscript"
    if not on_path(exe) then
      error(("R workers need Rscript (%s not found; Debian: apt-get install r-base-core), or give rscript")
        :format(exe), 0)
    end
    argv = argv or { exe, "--vanilla", "--default-packages=NULL", "-e", "suiro:::worker_main()" }
    local libs = getenv("SUIRO_R_LIBS")
    if libs and not exists(libs .. "/suiro/DESCRIPTION") then
      error("the r launcher needs suiro's R package in " .. libs .. " (SUIRO_R_LIBS); build it with scripts/build", 0)
    end
    libs = libs or host.r_libs
    local rest = host.r_lib_path or getenv("R_LIBS")
    if libs then
      local seen, parts = {}, {}
      for p in (libs .. ":" .. (rest or "")):gmatch("[^:]+") do
        if not seen[p] then seen[p] = true; parts[#parts + 1] = p end
      end
      env.R_LIBS = table.concat(parts, ":")
    elseif not l.argv then
      local lib_env = rest and ("R_LIBS=" .. shell_quote(rest) .. " ") or ""
      if not succeeds(lib_env .. shell_quote(exe)
          .. " --vanilla -e 'quit(status = !requireNamespace(\"suiro\", quietly = TRUE))'") then
        error(("the r launcher needs suiro's R package installed for %s (R CMD INSTALL it into a library on "
          .. ".libPaths(), e.g. one named by R_LIBS, or set SUIRO_R_LIBS)"):format(exe), 0)
      end
    end
  end
  -- workers resolve "module.fn" and require() with a Lua host's search paths
  env.SUIRO_LUA_PATH = host.lua_path
  env.SUIRO_LUA_CPATH = host.lua_cpath
  for k, v in pairs(l.env or {}) do env[k] = v end
  for k, v in pairs(check_env(host.pool_env, "suiro.pool", "env") or {}) do env[k] = v end
  env.SUIRO_HOST_LANG = host.lang
  return { exe = exe, argv = argv, env = env }
end
-- <<< worker commands

local function launcher_of(v, where)
  if v == nil or v == "lua" then return config.launcher("lua", {}, where) end
  if type(v) == "string" then
    if v == "python" or v == "r" then return config.launcher(v, {}, where) end
    fail(where, "launcher", ('must be "lua", "python", "r" or a launcher object, got "%s"'):format(v))
  end
  if getmetatable(v) == launcher_mt then return v end
  if type(v) == "table" and type(v.kind) == "string" and config.launcher_keys[v.kind] then
    local opts = {}
    for k, x in pairs(v) do if k ~= "kind" then opts[k] = x end end
    return config.launcher(v.kind, opts, where)
  end
  fail(where, "launcher", "must be a launcher (suiro.lua{}, suiro.python{}, suiro.r{}), got " .. type(v))
end

local function int_in(v, where, key, lo, hi)
  if v == nil then return nil end
  if math.type(v) ~= "integer" then
    if type(v) == "number" and v == math.floor(v) and v >= lo and v <= hi then return math.tointeger(v) end
    -- a string that reads as a number is shown as what it is: 'got 4096' would say it was one
    local shown = type(v) == "number" and tostring(v) or type(v) == "string" and ('"%s" (a string)'):format(v)
      or type(v)
    fail(where, key, ("must be an integer in %d..%d, got %s"):format(lo, hi, shown))
  end
  if v < lo or v > hi then fail(where, key, ("must be in %d..%d, got %d"):format(lo, hi, v)) end
  return v
end

local function seconds(v, where, key)
  if v == nil then return nil end
  if type(v) == "number" then
    if v ~= v or v < 0 then fail(where, key, "must be a duration of zero or more seconds, got " .. tostring(v)) end
    return v + 0.0
  end
  if type(v) == "string" then
    local s, err = parse.try_duration(v)
    if not s then fail(where, key, err) end
    return s
  end
  fail(where, key, "must be a number of seconds or a duration string, got " .. type(v))
end
config.seconds = seconds

local function bytes(v, where, key, lo, hi)
  if v == nil then return nil end
  if type(v) == "string" then
    local b, err = parse.try_size(v)
    if not b then fail(where, key, err) end
    v = b
  elseif type(v) ~= "number" then
    fail(where, key, "must be a number of bytes or a size string, got " .. type(v))
  end
  return int_in(v, where, key, lo, hi)
end

--- config.pool_options(opts, where [, what]) -> normalised options (see the top of this file);
--- raises "where: key: problem" (unknown keys: "unknown key "x" in what ...").
function config.pool_options(opts, where, what)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then fail(where, nil, "options must be a table, got " .. type(opts)) end
  parse.check_keys(opts, config.pool_keys, what or where)
  local o = {}
  o.workers = int_in(opts.workers, where, "workers", 0, 64) or 1
  o.max_workers = int_in(opts.max_workers, where, "max_workers", 1, 64)
  if o.max_workers and o.max_workers < o.workers then
    fail(where, "max_workers", ("must be at least workers (%d), got %d"):format(o.workers, o.max_workers))
  end
  o.timeout = seconds(opts.timeout, where, "timeout")
  o.start_timeout = seconds(opts.start_timeout, where, "start_timeout")
  o.env = check_env(opts.env, where, "env")
  if opts.respawn ~= nil and type(opts.respawn) ~= "boolean" then
    fail(where, "respawn", "must be true or false, got " .. type(opts.respawn))
  end
  o.respawn = opts.respawn
  o.ring_cap = int_in(opts.ring_cap, where, "ring_cap", 2, 1 << 20)
  o.result_slots = int_in(opts.result_slots, where, "result_slots", 1, 1 << 22)
  o.slot_size = bytes(opts.slot_size, where, "slot_size", 64, 65536)
  o.result_size = bytes(opts.result_size, where, "result_size", 64, 65536)
  for _, k in ipairs { "ring_cap", "slot_size", "result_size" } do
    local v = o[k]
    if v and v & (v - 1) ~= 0 then fail(where, k, ("must be a power of two, got %d"):format(v)) end
  end
  if opts.name ~= nil and (type(opts.name) ~= "string" or opts.name == "") then
    fail(where, "name", "must be a non-empty string, got " .. type(opts.name))
  end
  o.name = opts.name
  -- "local" (this host's pool, the default) or "mpi" (a pool on every host of an MPI job, docs/mpi.md)
  if opts.backend ~= nil and opts.backend ~= "local" and opts.backend ~= "mpi" then
    local b = opts.backend
    fail(where, "backend", 'must be "local" or "mpi", got ' .. (type(b) == "string" and ('"' .. b .. '"') or type(b)))
  end
  o.backend = opts.backend
  o.launcher = launcher_of(opts.launcher, where)
  return o
end

--- config.load(path [, env]) -> { name = options, ... } from a config script (a Lua file that
--- returns a table of named pools), every pool checked; raises "path: pool "name": key: problem".
--- env is the script's environment (default: a table over _G whose `suiro` has the launcher
--- constructors, which is what config scripts use from Python and R).
function config.load(path, env)
  if type(path) ~= "string" then error("argument 1 must be a file name, got " .. type(path), 0) end
  if not env then
    local launchers = {}
    for kind in pairs(config.launcher_keys) do
      launchers[kind] = function(opts) return config.launcher(kind, opts) end
    end
    env = setmetatable({ suiro = launchers }, { __index = _G })
  end
  local chunk, err = loadfile(path, "t", env)
  if not chunk then error(err, 0) end
  local ok, spec = pcall(chunk)
  if not ok then error(path .. ": " .. tostring(spec), 0) end
  if type(spec) ~= "table" then error(path .. " must return a table of pools, got " .. type(spec), 0) end
  local names = {}
  for name in pairs(spec) do
    if type(name) ~= "string" then error(path .. ": pool names must be strings, got " .. type(name), 0) end
    names[#names + 1] = name
  end
  table.sort(names)
  local pools = {}
  for _, name in ipairs(names) do
    local what = ('pool "%s"'):format(name)
    if type(spec[name]) ~= "table" then
      error(('%s: %s must be a table, got %s'):format(path, what, type(spec[name])), 0)
    end
    local ok2, o = pcall(config.pool_options, spec[name], what)
    if not ok2 then error(path .. ": " .. tostring(o), 0) end
    pools[name] = o
  end
  return pools, names
end

return config
