-- Pools, tasks and outcomes (issue: Lua scripting).
local suiro = require "suiro"
local support = require "tests.lua.support"

describe("suiro.pool", function()
  local pool = support.block_pool { workers = 2 }

  it("runs a function and returns every value", function()
    local t = pool:submit(function(x, y) return x + y, x * y end, 3, 4)
    local a, b = t:collect()
    assert.are.equal(7, a)
    assert.are.equal(12, b)
  end)

  it("keeps integer and float subtypes, strings, booleans, nil and tables", function()
    local a, b, c, d, e, f =
      pool:submit(function(...) return ... end, 1, 1.5, "x\0y", true, nil, { 1, { k = "v" } }):collect()
    assert.are.equal(math.type(a), "integer")
    assert.are.equal(math.type(b), "float")
    assert.are.equal("x\0y", c)
    assert.is_true(d)
    assert.is_nil(e)
    assert.are.same({ 1, { k = "v" } }, f)
  end)

  it("returns nothing when the task returns nothing", function()
    assert.are.equal(0, select("#", pool:submit(function() end):collect()))
  end)

  it("reports a timeout as nil, 'timeout' and can collect later", function()
    local t = pool:submit(function()
      local t0 = os.clock()
      while os.clock() - t0 < 0.3 do end
      return "late"
    end)
    local v, why = t:collect(0.05)
    assert.is_nil(v)
    assert.are.equal("timeout", why)
    assert.are.equal("late", t:collect(10))
  end)

  it("refuses to collect twice", function()
    local t = pool:submit(function() return 1 end)
    t:collect()
    assert.has_error(function() t:collect() end, "task:collect: this task was collected already")
  end)

  it("submits batches and collects them in input order", function()
    local tasks = pool:submit_batch(function(i) return i * i end, { { 1 }, { 2 }, { 3 }, { 4 } })
    assert.are.equal(4, #tasks)
    assert.are.same({ 1, 4, 9, 16 }, pool:collect_all(tasks, 10))
    -- without a timeout it waits as long as it takes
    assert.are.same({ 2, 3 }, pool:collect_all(pool:submit_batch(function(i) return i + 1 end, { { 1 }, { 2 } })))
  end)

  it("batch tasks are tasks: methods, tostring, collect_any, mixing with single tasks", function()
    local tasks = pool:submit_batch(function(i) return i * 10 end, { { 1 }, { 2 }, { 3 } })
    assert.are.equal(getmetatable(pool:submit(function() end)).__name, getmetatable(tasks[1]).__name)
    assert.matches("^suiro.task%(.*pending%)$", tostring(tasks[3]))
    assert.are.equal(20, tasks[2]:collect(10))
    assert.matches("collected%)$", tostring(tasks[2]))
    local single = pool:submit(function() return "one" end)
    assert.are.same({ 10, "one" }, pool:collect_all({ tasks[1], single }, 10))
    tasks[3]:release()
    assert.has_error(function() tasks[3]:collect() end, "task:collect: this task was released")
  end)

  it("dropped batches give their result slots back; a task kept from a batch still collects", function()
    local small <close> = suiro.pool { workers = 1, result_slots = 64 }
    local kept
    for round = 1, 40 do -- 40 x 32 tasks through 64 slots: only works if dropped batches are released
      local tasks, why = small:submit_batch(function(i) return i end, (function()
        local a = {}
        for i = 1, 32 do a[i] = { round * 100 + i } end
        return a
      end)())
      assert.are.equal(32, #tasks, why)
      if round == 1 then kept = tasks[7] end
      tasks = nil -- luacheck: ignore 311 (dropping the batch is the point)
      collectgarbage()
      collectgarbage()
    end
    assert.are.equal(107, kept:collect(10))
  end)

  it("dropped single tasks give their slots back, even when kept ones pin their slabs", function()
    local small <close> = suiro.pool { workers = 1, result_slots = 256, timeout = "5s" }
    local kept = {}
    for i = 1, 4000 do -- every 50th kept uncollected, the rest dropped uncollected: 16x the slots
      local t, why = small:submit(function(x) return x end, i)
      assert.is_truthy(t, why)
      if i % 50 == 0 then kept[#kept + 1] = t end
    end
    assert.are.equal(80, #kept)
    for j, t in ipairs(kept) do assert.are.equal(j * 50, t:collect(10)) end
  end)

  it("collect_all raises the first failure and keeps every other result collectable", function()
    local tasks = pool:submit_batch(function(i) if i == 2 then error("two") end return i end, { { 1 }, { 2 }, { 3 } })
    local ok, err = pcall(pool.collect_all, pool, tasks, 10)
    assert.is_false(ok)
    assert.are.equal(2, err.index)
    assert.matches("two", err.message)
    assert.are.equal(1, tasks[1]:collect(0))
    assert.are.equal(3, tasks[3]:collect(0))
    assert.has_error(function() tasks[2]:collect() end, "task:collect: this task was collected already")
  end)

  it("collect_all with errors = 'return' puts error objects in place of failed values", function()
    local tasks = pool:submit_batch(function(i) if i == 2 then error("two") end return i end, { { 1 }, { 2 }, { 3 } })
    local out = pool:collect_all(tasks, "10s", { errors = "return" })
    assert.are.equal(1, out[1])
    assert.is_true(suiro.is_error(out[2]))
    assert.are.equal("remote", out[2].class)
    assert.are.equal(2, out[2].index)
    assert.are.equal(3, out[3])
    assert.has_error(function() pool:collect_all(tasks, 1, { errors = "ignore" }) end)
  end)

  it("collect_any returns the first to finish", function()
    local slow = pool:submit(function() local t0 = os.clock() while os.clock() - t0 < 0.3 do end return "slow" end)
    local fast = pool:submit(function() return "fast" end)
    local i, v = pool:collect_any({ slow, fast }, 10)
    assert.are.equal(2, i)
    assert.are.equal("fast", v)
    assert.are.equal("slow", slow:collect(10))
  end)

  it("reports status with one record per worker", function()
    local s = pool:status()
    assert.are.equal(2, #s.workers)
    for i, w in ipairs(s.workers) do
      assert.are.equal(i - 1, w.slot)
      assert.is_true(w.pid > 0)
      assert.is_string(w.state)
      assert.is_true(w.tasks >= 0)
    end
    assert.is_true(s.tasks > 0)
  end)

  it("names the bad argument on misuse", function()
    assert.has_error(function() pool:submit(nil) end,
      "pool:submit: argument 1 must be a function or call spec, got nil")
    assert.has_error(function() pool:submit(42) end,
      "pool:submit: argument 1 must be a function or call spec, got number")
    assert.has_error(function() suiro.pool { workers = -1 } end)
    assert.has_error(function() suiro.pool { wrokers = 2 } end,
      'unknown key "wrokers" in suiro.pool options (valid keys: backend, env, launcher, max_workers, name, '
      .. 'respawn, result_size, result_slots, ring_cap, slot_size, start_timeout, timeout, workers); '
      .. 'did you mean workers?')
    -- a string that looks like a number is named as a string, not shown as a number
    assert.has_error(function() suiro.pool { ring_cap = "4096" } end,
      'suiro.pool: ring_cap: must be an integer in 2..1048576, got "4096" (a string)')
    assert.has_error(function() suiro.pool { workers = 1.5 } end,
      "suiro.pool: workers: must be an integer in 0..64, got 1.5")
  end)

  it("refuses values that cannot cross, naming the path", function()
    local ok, err = pcall(pool.submit, pool, function(x) return x end, { conn = io.stdout })
    assert.is_false(ok)
    assert.matches("submit: argument 2.conn: userdata %(FILE%*%) cannot be sent", err)
    ok, err = pcall(pool.submit, pool, function(x) return x end, 1, { 1, 2, x = 3 })
    assert.is_false(ok)
    assert.matches("argument 3: table mixes list items", err)
    ok, err = pcall(pool.submit, pool, function(x) return x end, coroutine.create(print))
    assert.is_false(ok)
    assert.matches("argument 2: a coroutine cannot be sent", err)
  end)

  it("gives each task fresh globals", function()
    pool:submit(function() leaked = 42 end):collect() -- luacheck: ignore
    local probe = function() return leaked end -- luacheck: ignore
    local seen = pool:collect_all(pool:submit_batch(probe, { {}, {}, {}, {} }), 10)
    for i = 1, 4 do assert.is_nil(seen[i]) end
  end)

  it("reports the time", function()
    local a = suiro.now()
    local b = suiro.now()
    assert.is_true(b >= a)
    assert.are.equal("float", math.type(a))
  end)
end)

describe("pool lifetime", function()
  it("stops at the end of a <close> scope", function()
    local name
    do
      local p <close> = suiro.pool { workers = 1 }
      name = p:status().region
      assert.are.equal(3, p:submit(function() return 3 end):collect())
    end
    local f = io.open("/dev/shm" .. name)
    assert.is_nil(f)
  end)

  it("stops when collected by the GC, with its tasks of every kind dropped", function()
    local name
    do
      local p = suiro.pool { workers = 1 }
      name = p:status().region
      for i = 1, 100 do p:submit(function(x) return x end, i) end -- dropped uncollected
      p:submit(function() return 1 end):collect()
      p:submit_batch(function(x) return x end, { { 1 }, { 2 } })
    end
    collectgarbage()
    collectgarbage()
    assert.is_nil(io.open("/dev/shm" .. name))
  end)
end)
