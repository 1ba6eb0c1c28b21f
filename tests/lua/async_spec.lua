-- suiro.run: coroutines await tasks; the scheduler sleeps on the pools' eventfds.
local suiro = require "suiro"
local support = require "tests.lua.support"

describe("suiro.run", function()
  local pool = support.block_pool { workers = 2 }

  it("returns the function's results", function()
    local a, b = suiro.run(function(x) return x, x + 1 end, 41)
    assert.are.equal(41, a)
    assert.are.equal(42, b)
  end)

  it("keeps many tasks in flight from many coroutines", function()
    local n = 200
    local results = {}
    suiro.run(function()
      for i = 1, n do
        suiro.spawn(function()
          results[i] = pool:submit(function(x) return x * x end, i):await()
        end)
      end
    end)
    for i = 1, n do assert.are.equal(i * i, results[i]) end
  end)

  it("awaits out of order without blocking the others", function()
    -- the slow task finishes only after the fast coroutine has resumed (it waits for a file that
    -- coroutine writes), so a scheduler that blocked on the first await would never get there:
    -- the slow task then gives up after 10 s and reports it
    local flag = os.tmpname()
    os.remove(flag)
    local order = {}
    suiro.run(function()
      suiro.spawn(function()
        local r = pool:submit(function(path)
          local t0 = os.time()
          while not io.open(path) do
            if os.time() - t0 > 10 then return "gave up" end
            os.execute("sleep 0.01")
          end
          return "done"
        end, flag):await()
        order[#order + 1] = "slow " .. r
      end)
      suiro.spawn(function()
        pool:submit(function() return 1 end):await()
        order[#order + 1] = "fast"
        io.open(flag, "w"):close()
      end)
    end)
    os.remove(flag)
    assert.are.same({ "fast", "slow done" }, order)
  end)

  it("propagates a task error into the awaiting coroutine", function()
    local ok, err = suiro.run(function()
      return pcall(function() return pool:submit(function() error("boom") end):await() end)
    end)
    assert.is_false(ok)
    assert.are.equal("remote", err.class)
  end)

  it("times out an await", function()
    local v, why = suiro.run(function()
      return pool:submit(function() local t = os.clock() while os.clock() - t < 0.3 do end end):await(0.05)
    end)
    assert.is_nil(v)
    assert.are.equal("timeout", why)
  end)

  it("await outside suiro.run blocks like collect", function()
    assert.are.equal(9, pool:submit(function() return 9 end):await())
  end)
end)
