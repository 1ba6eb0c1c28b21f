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
  end)
end
