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
