-- Nested submissions: a worker submits to its own pool and waits without deadlock.
local suiro = require "suiro"

describe("nested submits", function()
  it("work with one worker", function()
    local pool <close> = suiro.pool { workers = 1 }
    local total = pool:submit(function(n)
      local s = require "suiro"
      local p = s.current_pool()
      local tasks = {}
      for i = 1, n do tasks[i] = p:submit(function(x) return x * 2 end, i) end
      local sum = 0
      for i = 1, n do sum = sum + tasks[i]:collect() end
      return sum
    end, 100):collect(30)
    assert.are.equal(10100, total)
  end)

  it("nest three levels deep with one worker", function()
    local pool <close> = suiro.pool { workers = 1 }
    local function level(d)
      if d == 0 then return 1 end
      local p = require("suiro").current_pool()
      local a, b = p:submit(level, d - 1), p:submit(level, d - 1)
      return a:collect() + b:collect()
    end
    assert.are.equal(8, pool:submit(level, 3):collect(30))
  end)

  it("current_pool is nil in a host", function()
    assert.is_nil(suiro.current_pool())
  end)
end)
