-- Python and R workers from a Lua host: call specs and names of their language run there; a Lua
-- function, which they cannot run, is refused at send time and the pool keeps serving.
-- (scripts/test builds both faces first: the Python extension in-tree, the R package in build/R-lib.)
local suiro = require "suiro"

local function strip(err) return (tostring(err):gsub("^.-:%d+: ", "")) end

for _, case in ipairs {
  { lang = "python", launcher = function() return suiro.python {} end, name = "module.fn",
    spec = suiro.call { source = "sum(v) / len(v)", v = suiro.f64 { 1, 2, 3, 10 } }, want = 4.0 },
  { lang = "r", launcher = function() return suiro.r {} end, name = "pkg::fn",
    spec = suiro.call { source = "mean(v)", v = suiro.f64 { 1, 2, 3, 10 } }, want = 4.0 },
} do
  describe(case.lang .. " workers from Lua", function()
    local pool
    setup(function() pool = suiro.pool { workers = 1, launcher = case.launcher(), timeout = "30s" } end)
    teardown(function() if pool then pool:stop() end end)

    it("run call specs of their language", function()
      assert.are.equal(case.want, pool:submit(case.spec):collect())
    end)

    it("refuse a Lua function at send time, naming what to send instead", function()
      local want = ("a Lua function cannot run on %s workers; name one of their functions (\"%s\") "
        .. "or send a suiro.call"):format(case.lang, case.name)
      local ok, err = pcall(function() return pool:submit(function(x) return x end, 1) end)
      assert.is_false(ok)
      assert.are.equal("pool:submit: argument 1: " .. want, strip(err))
      ok, err = pcall(function() return pool:submit_batch(function(x) return x end, { { 1 }, { 2 } }) end)
      assert.is_false(ok)
      assert.are.equal("pool:submit_batch: argument 1: " .. want, strip(err))
      ok, err = pcall(function() return pool:map(function(x) return x end, { 1, 2 }) end)
      assert.is_false(ok)
      assert.are.equal("pool:map: argument 1: " .. want, strip(err))
      -- nothing was sent, and the pool serves on
      assert.are.equal(1, pool:status().workers[1].tasks) -- only the first test's task ran
      assert.are.equal(case.want, pool:submit(case.spec):collect())
    end)

    if case.lang == "r" then
      it("refuse R-serialized bytes from the Lua host, naming it; take R code from each other", function()
        -- serialize(1, NULL) would be unserialize()d by R: crafted bytes of that form crash R
        local rser = suiro.wire.func { lang = "r", key = 0, name = "base::unserialize",
                                       captured = { suiro.bytes("X\n\0\0\0\3") } }
        local ok, err = pcall(function()
          return pool:submit(suiro.call { source = "x", x = rser }):collect()
        end)
        assert.is_false(ok)
        assert.matches("from the lua host is refused", tostring(err), 1, true)
        -- a nested task from an R worker carries an R closure: its sibling takes it
        local nested = suiro.call { source = "f <- function(x) x + 1; "
          .. "suiro::suiro_collect(suiro::suiro_submit(suiro::suiro_current_pool(), f, 41), timeout = 20)" }
        assert.are.equal(42, pool:submit(nested):collect())
      end)
    end
  end)
end

describe("python workers from Lua find modules", function()
  -- a module in a directory of its own, reached only through PYTHONPATH (the worker runs
  -- python3 -I, which ignores PYTHONPATH; the launcher passes it on)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local f = assert(io.open(dir .. "/suiro_pp_probe.py", "w"))
  f:write("def add1(x):\n    return x + 1\n")
  f:close()
  teardown(function() os.execute("rm -rf " .. dir) end)

  it("through the launcher's env PYTHONPATH", function()
    local pool <close> = suiro.pool { workers = 1, timeout = "30s",
      launcher = suiro.python { env = { PYTHONPATH = dir } } }
    assert.are.equal(42, pool:submit("suiro_pp_probe.add1", 41):collect())
  end)

  it("through the pool's env PYTHONPATH, and say what is missing otherwise", function()
    local pool <close> = suiro.pool { workers = 1, timeout = "30s", env = { PYTHONPATH = dir },
      launcher = suiro.python {} }
    assert.are.equal(42, pool:submit("suiro_pp_probe.add1", 41):collect())
    local bare <close> = suiro.pool { workers = 1, timeout = "30s", launcher = suiro.python {} }
    local ok, err = pcall(function() return bare:submit("suiro_pp_probe.add1", 41):collect() end)
    assert.is_false(ok)
    assert.matches("suiro_pp_probe", tostring(err))
  end)
end)

-- One environment rule for workers of every kind, from every host (suiro.config.worker_env): each
-- numeric library limited to one thread, R in a UTF-8 locale; the pool's env overrides a default.
describe("worker environment from a Lua host", function()
  local thread_vars = require("suiro.config").thread_vars
  local names = suiro.strings(thread_vars)
  local readers = {
    lua = function(ks) local out = {} for i = 1, #ks do out[i] = os.getenv(ks[i]) or "" end return out end,
    python = suiro.call { source = "[__import__('os').environ.get(k, '') for k in ks]", ks = names },
    r = suiro.call { source = "unname(Sys.getenv(ks))", ks = names },
  }
  for _, kind in ipairs { "lua", "python", "r" } do
    it(kind .. " workers get the thread limits and the pool's env wins", function()
      assert.is_true(#thread_vars >= 7)
      local pool <close> = suiro.pool { workers = 1, launcher = suiro[kind] {}, timeout = "30s",
                                        env = { MKL_NUM_THREADS = "3" } }
      local t = kind == "lua" and pool:submit(readers.lua, names) or pool:submit(readers[kind])
      local got = t:collect()
      for i, k in ipairs(thread_vars) do
        local v = got[i]
        assert.are.equal(k == "MKL_NUM_THREADS" and "3" or "1", v, kind .. " worker: " .. k)
      end
      if kind == "r" then
        local lang = pool:submit(suiro.call { source = "Sys.getenv('LANG')" }):collect()
        assert.are.equal("C.UTF-8", lang)
      end
    end)
  end
end)

-- One rule for where workers live, from every host (suiro.config.launch): the launcher's option
-- beats the variable (SUIRO_WORKER_EXE, SUIRO_PY_WORKER, SUIRO_R_LIBS), which beats what the host
-- knows of itself, which beats what is installed. Each case runs in a child lua5.4 whose
-- environment holds exactly the variables given, so the suite's own settings do not leak in.
describe("config.launch: one precedence", function()
  local vars = { "SUIRO_WORKER_EXE", "SUIRO_PY_WORKER", "SUIRO_R_LIBS", "R_LIBS", "SUIRO_SANITIZED", "PYTHONPATH" }
  local lua_exe = io.popen("command -v lua5.4"):read("l")
  local child = os.tmpname()
  local f = assert(io.open(child, "w"))
  f:write([[
package.path = "engine/conf/?.lua;" .. package.path
local kind, opts, host = arg[1], load("return " .. arg[2])(), load("return " .. arg[3])()
local ok, r = pcall(require("suiro.config").launch, kind, opts, host)
if not ok then io.write("error: ", r) os.exit(0) end
io.write(r.exe, "|", table.concat(r.argv or {}, " "), "|", r.env.R_LIBS or "", "|", r.env.SUIRO_HOST_LANG,
  "|", r.env.OMP_NUM_THREADS, "|", r.env.SUIRO_PYTHONPATH or "")
]])
  f:close()
  teardown(function() os.remove(child) end)
  local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
  local function launch(set, kind, opts, host)
    local cmd = { "env" }
    for _, v in ipairs(vars) do cmd[#cmd + 1] = "-u " .. v end
    for k, v in pairs(set) do cmd[#cmd + 1] = k .. "=" .. q(v) end
    for _, a in ipairs { lua_exe, child, kind, opts, host } do cmd[#cmd + 1] = q(a) end
    local p = assert(io.popen(table.concat(cmd, " ") .. " 2>&1"))
    local out = p:read("a")
    p:close()
    return out
  end
  local py = "bindings/python/suiro/_worker.py" -- a file that exists
  local lib = "build/R-lib"                       -- a library holding suiro (scripts/build)

  it("lua: exe > SUIRO_WORKER_EXE > the host's suiro > PATH", function()
    local host = '{ lang = "python", worker_exe = "/h/suiro" }'
    assert.are.equal("/h/suiro|||python|1|", launch({}, "lua", "{}", host))
    assert.are.equal("/v/suiro|||python|1|", launch({ SUIRO_WORKER_EXE = "/v/suiro" }, "lua", "{}", host))
    assert.are.equal("/o/suiro|/o/suiro w||python|1|",
      launch({ SUIRO_WORKER_EXE = "/v/suiro" }, "lua", '{ exe = "/o/suiro", argv = { "/o/suiro", "w" } }', host))
    local none = launch({ PATH = "/nonexistent" }, "lua", "{}", '{ lang = "r" }')
    assert.matches("cannot find the suiro worker program", none, 1, true)
  end)

  it("python: argv > SUIRO_PY_WORKER > the host's script > the installed package", function()
    local host = '{ lang = "lua", python = "/h/python3", py_worker = "/h/_worker.py" }'
    assert.are.equal("/h/python3|/h/python3 -I /h/_worker.py||lua|1|", launch({}, "python", "{}", host))
    assert.are.equal("/h/python3|/h/python3 -I " .. py .. "||lua|1|",
      launch({ SUIRO_PY_WORKER = py }, "python", "{}", host))
    assert.matches("SUIRO_PY_WORKER names no file (/nonexistent.py)",
      launch({ SUIRO_PY_WORKER = "/nonexistent.py" }, "python", "{}", host), 1, true)
    -- the launcher's command wins, even over a variable that names nothing
    assert.are.equal("/o/py|/o/py -I x.py||lua|1|", launch({ SUIRO_PY_WORKER = "/nonexistent.py" }, "python",
      '{ python = "/o/py", argv = { "/o/py", "-I", "x.py" } }', host))
    -- an interpreter without the package and no script: refused, naming it
    assert.matches("needs suiro's Python package for /bin/false",
      launch({}, "python", '{ python = "/bin/false" }', '{ lang = "r" }'), 1, true)
  end)

  it("r: rscript > the host's Rscript; SUIRO_R_LIBS > the host's library, then R's path", function()
    local host = '{ lang = "python", rscript = "/bin/sh", r_libs = "/h/lib", r_lib_path = "/a:/h/lib" }'
    local argv = "/bin/sh --vanilla --default-packages=NULL -e suiro:::worker_main()"
    assert.are.equal("/bin/sh|" .. argv .. "|/h/lib:/a|python|1|", launch({}, "r", "{}", host))
    assert.are.equal("/bin/sh|" .. argv .. "|" .. lib .. ":/a:/h/lib|python|1|",
      launch({ SUIRO_R_LIBS = lib }, "r", "{}", host))
    assert.matches("needs suiro's R package in /nonexistent (SUIRO_R_LIBS)",
      launch({ SUIRO_R_LIBS = "/nonexistent" }, "r", "{}", host), 1, true)
    assert.are.equal("/bin/true|/bin/true --vanilla", launch({}, "r", '{ rscript = "/bin/true" }', host):sub(1, 29))
    assert.matches("R workers need Rscript (/nonexistent/Rscript not found",
      launch({}, "r", '{ rscript = "/nonexistent/Rscript" }', host), 1, true)
    -- without a host library: R_LIBS from the environment, after the variable
    assert.are.equal("/bin/sh|" .. argv .. "|" .. lib .. ":/e|lua|1|",
      launch({ SUIRO_R_LIBS = lib, R_LIBS = "/e" }, "r", "{}", '{ lang = "lua", rscript = "/bin/sh" }'))
  end)

  it("env: defaults < the host's paths < the launcher's env < the pool's; the host's language always", function()
    local host = '{ lang = "lua", python = "/p", py_worker = "/w.py", pythonpath = "/hp", pool_env = %s }'
    local opts = '{ env = { OMP_NUM_THREADS = "2", SUIRO_PYTHONPATH = "/lp", SUIRO_HOST_LANG = "x" } }'
    assert.are.equal("/p|/p -I /w.py||lua|1|/hp", launch({}, "python", "{}", host:format("nil")))
    assert.are.equal("/p|/p -I /w.py||lua|2|/lp", launch({}, "python", opts, host:format("nil")))
    assert.are.equal("/p|/p -I /w.py||lua|3|/lp",
      launch({}, "python", opts, host:format('{ OMP_NUM_THREADS = 3, SUIRO_HOST_LANG = "y" }')))
    local rhost = '{ lang = "r", rscript = "/bin/sh", r_libs = "/h", pool_env = { R_LIBS = "/pool" } }'
    assert.matches("|/pool|r|", launch({}, "r", "{}", rhost), 1, true)
  end)

  it("a Lua host resolves its own pools by it (SUIRO_WORKER_EXE beats the suiro next to the module)", function()
    local spec = suiro._pool_spec(require("suiro.config").pool_options({ launcher = suiro.lua {} }, "t"))
    assert.are.equal(os.getenv("SUIRO_WORKER_EXE") or require("suiro.core").worker_exe(), spec.exe)
    assert.are.equal("lua", spec.env.SUIRO_HOST_LANG)
    assert.are.equal(package.path, spec.env.SUIRO_LUA_PATH)
    spec = suiro._pool_spec(require("suiro.config").pool_options(
      { launcher = suiro.python { python = "/usr/bin/python3" } }, "t"))
    assert.are.equal("/usr/bin/python3", spec.exe)
    assert.are.equal("-I", spec.argv[2])
  end)
end)
