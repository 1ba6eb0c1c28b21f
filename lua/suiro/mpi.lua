-- suiro.mpi: the same script on many hosts, over Open MPI (docs/mpi.md).
--
--   mpirun -np 3 suiro run script.lua        -- rank 0 runs the script, ranks 1 and 2 serve
--   local pool <close> = suiro.pool { backend = "mpi", workers = 2 }   -- 2 workers per host
--
-- An MPI pool is a local pool on every host of the job (rank 0's included), started with the
-- same options. Tasks go round robin over the hosts; a map's ranges are dealt out as hosts ask
-- for them (lua/lmpi.c). Without mpirun the pool is rank 0's local pool alone, with one host in
-- status().hosts. The MPI module (build/lib/suiro/mpi.so) is loaded only inside an MPI job.

local core = require "suiro.core"

local M = {}

local C -- the C module, once loaded

--- true inside a job started by Open MPI's mpirun with more than one rank
function M.in_job()
  local size = tonumber(os.getenv("OMPI_COMM_WORLD_SIZE") or "")
  return size ~= nil and size > 1
end

--- the rank of this process in the job (0 outside one)
function M.rank() return tonumber(os.getenv("OMPI_COMM_WORLD_RANK") or "") or 0 end

local function readable(path)
  local f = path and io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- where the MPI module is: SUIRO_MPI_SO, package.cpath, or lib/suiro/mpi.so next to the binary
function M.module_path()
  local env = os.getenv("SUIRO_MPI_SO")
  if env then return env end
  local found = package.searchpath("suiro.mpi", package.cpath)
  if found then return found end
  local exe = core.worker_exe()
  local prefix = exe and exe:match("^(.*)/bin/[^/]+$")
  local installed = { prefix and (prefix .. "/lib/suiro/mpi.so"), prefix and (prefix .. "/lib/lua/5.4/suiro/mpi.so") }
  for _, p in ipairs(installed) do
    if readable(p) then return p end
  end
  return nil
end

--- loads the C module (raises naming what is missing)
function M.load()
  if C then return C end
  local path = M.module_path()
  if not readable(path) then
    error("the MPI tier is not built (no lib/suiro/mpi.so next to " .. tostring(core.worker_exe()) ..
      "): install openmpi-bin and libopenmpi-dev (scripts/setup) and run scripts/build", 0)
  end
  -- The module uses the engine of this process: the suiro command exports it; under stock
  -- lua5.4, suiro.core's symbols are made global first so that there is still one engine.
  if package.preload["suiro.core"] == nil then
    local core_path = package.searchpath("suiro.core", package.cpath)
    -- another spelling of the same file: package.loadlib reuses the handle require made (local)
    -- for the same path instead of opening it again with global symbols
    if core_path then package.loadlib((core_path:gsub("/([^/]+)$", "/./%1")), "*") end
  end
  -- Open MPI loads plugins that expect libmpi's symbols globally
  local ok, err = package.loadlib(path, "*")
  if not ok then error("cannot load the MPI module " .. path .. ": " .. tostring(err), 0) end
  local open, err2 = package.loadlib(path, "luaopen_suiro_mpi")
  if not open then error("cannot load the MPI module " .. path .. ": " .. tostring(err2), 0) end
  C = open()
  -- awaiting a task or map of another host blocks (suiro.run's scheduler sleeps on local pools)
  C.task_methods.await = function(self, timeout) return self:collect(timeout) end
  C.map_methods.await = function(self, timeout) return self:collect(timeout) end
  -- the handle that ends the job cleanly when the state closes (after the pools: made first)
  return C
end

local started -- rank, size, host once MPI is up

--- starts MPI in this process (inside a job): returns rank, size, host
function M.start()
  if started then return table.unpack(started) end
  local c = M.load()
  local rank, size, host = c.start()
  started = { rank, size, host }
  -- closing the state ends the job: the sentinel is finalized after every pool made later
  M._sentinel = setmetatable({}, { __gc = function() c.shutdown() end })
  return rank, size, host
end

--- this process's pid
function M.pid()
  local f = io.open("/proc/self/stat", "r")
  local pid = f and f:read("n")
  if f then f:close() end
  return pid
end

local function hostname()
  local f = io.open("/proc/sys/kernel/hostname", "r")
  local h = f and f:read("l")
  if f then f:close() end
  return h or "localhost"
end

---------------------------------------------------------------------------------------------------
-- Serving (ranks 1..K-1)

--- runs this rank as a server until rank 0 ends the job; returns true on a clean end. The
--- serving loop is C only (engine/cluster/serve.c): it starts the pools from the resolved options
--- rank 0 sends, so no Lua runs on a serving rank from here on.
function M.serve()
  M.serving = true
  local rank, _, host = M.start()
  local ok, lost, signal = C.serve()
  -- ended by a signal (Open MPI's runtime ending the job): rank 0 says why, we go quietly
  if signal ~= 0 then return false, signal == 15 and 143 or 130 end
  if lost then io.stderr:write(("suiro (rank %d, host %s): %s\n"):format(rank, host, lost)) end
  return ok
end

--- what the suiro command runs before a script inside a job: rank 0 brings MPI up (so the
--- serving ranks always end cleanly), the others serve and never run the script
function M.cli_main()
  if M.rank() ~= 0 then
    local ok, code = M.serve()
    return ok and 0 or code or 1
  end
  M.start()
  return nil
end

---------------------------------------------------------------------------------------------------
-- MPI pools (rank 0)

local mpool = {}
mpool.__index = mpool
mpool.__name = "suiro.pool"

local function is_remote(task) return C ~= nil and C.task_host(task) ~= nil end

--- suiro.pool { backend = "mpi", ... } with the options already checked (suiro.config)
function M.pool(o, start_pool)
  local env = {}
  for k, v in pairs(o.env or {}) do env[k] = v end
  local rank, size, host = 0, 1, hostname()
  if M.in_job() then rank, size, host = M.start() end
  if rank ~= 0 then error("backend \"mpi\": only rank 0 runs the script (this is rank " .. rank .. ")", 0) end
  local lo = {}
  for k, v in pairs(o) do lo[k] = v end
  lo.env = env
  env.SUIRO_MPI_RANK = "0"
  env.SUIRO_MPI_HOST = host
  local lp = start_pool(lo)
  local self = setmetatable({ _local = lp, _size = size, _host = host, _name = o.name, _timeout = o.timeout }, mpool)
  if size > 1 then
    local suiro = require "suiro"
    local ro = {}
    for k, v in pairs(o) do ro[k] = v end
    local launcher = {}
    for k, v in pairs(o.launcher) do launcher[k] = v end
    ro.launcher = launcher
    -- the serving ranks get the resolved pool (exe, argv, env, sizes): they start it in C
    local ok, x = pcall(C.pool_new, lp, suiro.wire.encode(suiro._pool_spec(ro)), o.start_timeout or 10)
    if not ok then
      lp:stop()
      error(x, 0)
    end
    self._x = x
  end
  return self
end

function mpool:__tostring()
  return ("suiro.pool(%smpi, %d host%s)"):format(self._name and (self._name .. ", ") or "", self._size,
    self._size == 1 and "" or "s")
end

function mpool:stop(timeout)
  if self._x then C.pool_stop(self._x) end
  self._local:stop(timeout)
end
mpool.__close = function(self) self:stop() end
mpool.__gc = mpool.__close

--- pool:submit(f, ...): on the next host in turn (rank 0's local pool among them)
function mpool:submit(f, ...)
  if not self._x then return self._local:submit(f, ...) end
  local h = C.place(self._x)
  if h == 0 then return self._local:submit(f, ...) end
  return C.submit(self._x, h, f, ...)
end

--- pool:submit_batch(f, lists): the tasks in turn over the hosts; the local ones in one batch
function mpool:submit_batch(f, lists)
  if not self._x then return self._local:submit_batch(f, lists) end
  if type(lists) ~= "table" then
    error("pool:submit_batch: argument 2 (a list of argument lists) must be a table, got " .. type(lists), 2)
  end
  local n = #lists
  local out, loc, where = {}, {}, {}
  for i = 1, n do
    local args = lists[i]
    if type(args) ~= "table" then
      error(("pool:submit_batch: argument lists[%d] must be a table, got %s"):format(i, type(args)), 2)
    end
    local h = C.place(self._x)
    if h == 0 then
      loc[#loc + 1] = args
      where[#loc] = i
    else
      local ok, t = pcall(C.submit, self._x, h, f, table.unpack(args, 1, args.n or #args))
      if not ok then error(tostring(t):gsub("^pool:submit: ", ("pool:submit_batch: lists[%d]: "):format(i)), 2) end
      out[i] = t
    end
  end
  if #loc > 0 then
    local tasks, why = self._local:submit_batch(f, loc)
    for k, t in ipairs(tasks) do out[where[k]] = t end
    if why then return out, why end
  end
  return out
end

local function all_local(tasks)
  for i = 1, #tasks do if is_remote(tasks[i]) then return false end end
  return true
end

local function deadline_of(self, timeout)
  if timeout == nil then timeout = self._timeout end
  if type(timeout) == "string" then timeout = require("suiro.config").seconds(timeout, "collect", "timeout") end
  if timeout == nil or timeout == math.huge then return math.huge end
  return core.now() + timeout
end

--- pool:collect_all(tasks, [timeout], [{ errors = "raise" | "return" }])
function mpool:collect_all(tasks, timeout, opts)
  if not self._x or all_local(tasks) then return self._local:collect_all(tasks, timeout, opts) end
  if type(tasks) ~= "table" then error("pool:collect_all: argument 1 (a list of tasks) must be a table", 2) end
  local return_errors = false
  if opts ~= nil then
    for k in pairs(opts) do
      if k ~= "errors" then error("pool:collect_all: unknown option " .. tostring(k) .. " (valid: errors)", 2) end
    end
    if opts.errors ~= nil and opts.errors ~= "raise" and opts.errors ~= "return" then
      error("pool:collect_all: errors must be \"raise\" or \"return\", got " .. tostring(opts.errors), 2)
    end
    return_errors = opts.errors == "return"
  end
  local limit = deadline_of(self, timeout)
  while true do
    local waiting = false
    for i = 1, #tasks do
      if not tasks[i]:ready() then waiting = true; break end
    end
    if not waiting then break end
    local left = limit - core.now()
    if left <= 0 then return nil, "timeout" end
    C.wait(math.min(left, 0.1))
  end
  local out = {}
  for i = 1, #tasks do
    local ok, v = pcall(tasks[i].collect, tasks[i], 0)
    if not ok then
      if not return_errors then error(v, 0) end
      if type(v) == "table" and v.index == nil and getmetatable(v) == core.error_mt then v.index = i end
      out[i] = v
    else
      out[i] = v
    end
  end
  return out
end

--- pool:collect_any(tasks, [timeout]) -> index, values...
function mpool:collect_any(tasks, timeout)
  if not self._x or all_local(tasks) then return self._local:collect_any(tasks, timeout) end
  if #tasks == 0 then error("pool:collect_any: no tasks given", 2) end
  local limit = deadline_of(self, timeout)
  while true do
    for i = 1, #tasks do
      if tasks[i]:ready() then
        return i, tasks[i]:collect(0)
      end
    end
    local left = limit - core.now()
    if left <= 0 then return nil, "timeout" end
    C.wait(math.min(left, 0.1))
  end
end

--- pool:map(f, xs, opts): the ranges are dealt out over every host
function mpool:map(f, xs, opts)
  if not self._x then return self._local:map(f, xs, opts) end
  local suiro = require "suiro"
  local ok, m = pcall(function() return C.map(self._x, f, xs, suiro._map_spec(opts, "pool:map")) end)
  if not ok then error(m, 2) end
  return m
end

--- pool:map_prepare(f, xs, opts): pm:run([new_xs]) runs the map again (over every host)
function mpool:map_prepare(f, xs, opts)
  if not self._x then return self._local:map_prepare(f, xs, opts) end
  local pool = self
  local pm = { _xs = xs }
  function pm.run(prepared, new_xs, timeout)
    local m = pool:map(f, new_xs or prepared._xs, opts)
    return m:collect(timeout)
  end
  function pm.free() end
  return pm
end

--- pool:status(): the local pool's status, and nodes = { { node =, rank =, workers = {...} }, ... }
--- (also as hosts, with host = the node's name)
function mpool:status()
  local st = self._local:status()
  local hosts = { { host = self._host, rank = 0, pid = M.pid(), cpus = C and C.cpus() or nil, workers = st.workers,
    live = st.live } }
  if self._x then
    for _, h in ipairs(C.status(self._x)) do
      local s = h.status or {}
      hosts[#hosts + 1] = {
        host = h.host, rank = h.rank, pid = h.pid, cpus = h.cpus, workers = s.workers or {}, live = s.live or 0,
        bytes_sent = h.bytes_sent, bytes_received = h.bytes_received, error = h.error,
      }
    end
  end
  -- the tier's "host" is a node (the engine's host is the process that made a pool): the same
  -- list as nodes, each with node = its name; hosts and host stay for the scripts that use them
  for _, h in ipairs(hosts) do h.node = h.host end
  st.hosts = hosts
  st.nodes = hosts
  st.backend = "mpi"
  return st
end

-- the rest acts on rank 0's local pool
for _, k in ipairs { "spawn", "retire", "eventfd", "event_ack", "set_timeout" } do
  mpool[k] = function(self, ...) return self._local[k](self._local, ...) end
end

--- suiro doctor's check: runs a map on a 2-rank job on this machine. Returns ok, detail.
function M.doctor()
  local path = M.module_path()
  if not readable(path) then
    return false, "the MPI module is not built (scripts/setup installs libopenmpi-dev; then scripts/build)"
  end
  local probe = io.popen("command -v mpirun 2>/dev/null")
  local mpirun = probe and probe:read("l")
  if probe then probe:close() end
  if not mpirun or mpirun == "" then return false, "mpirun not found (apt-get install openmpi-bin)" end
  if M.in_job() then return true, "running inside an MPI job (rank " .. M.rank() .. ")" end
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write([[
local suiro = require "suiro"
local pool <close> = suiro.pool { backend = "mpi", workers = 1 }
local r = pool:map(function(x) return x end, suiro.range(1, 1000), { template = "f64" }):collect(30)
print("mpi-probe", #pool:status().hosts, r:sum(), require("suiro.mpi").load().version())
]])
  f:close()
  local t0 = core.now()
  local cmd = ("OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 60 %s --oversubscribe -np 2 " ..
    "--bind-to none --mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo %s run %s 2>&1"):format(
    mpirun, core.worker_exe(), script)
  local p = io.popen(cmd)
  local out = p and p:read("a") or ""
  if p then p:close() end
  os.remove(script)
  local hosts, sum, version = out:match("mpi%-probe\t(%d+)\t([%d.]+)\t([^\n]*)")
  if hosts == "2" and tonumber(sum) == 500500 then
    return true, ("%s: 2 ranks ran a map (%.0f ms with mpirun)"):format(version, (core.now() - t0) * 1e3)
  end
  return false, "a 2-rank job failed: " .. (out:gsub("%s+", " "):sub(1, 300))
end

return M
