-- Reliability: faults, misuse and hostile input, one block per finding of the reliability issue.
-- Every wait here is bounded; processes that may block run as children with a deadline.
local suiro = require "suiro"
local support = require "tests.lua.support"

local function wait_until(cond, secs, what)
  local t0 = suiro.now()
  while not cond() do
    if suiro.now() - t0 > secs then error("timed out waiting for " .. what, 2) end
    os.execute("sleep 0.005")
  end
end

-- shm entries of process pid
local function shm_of(pid)
  local n = 0
  local p = io.popen("ls /dev/shm")
  local prefix = ("suiro_%x_"):format(pid)
  for name in p:lines() do
    if name:sub(1, #prefix) == prefix then n = n + 1 end
  end
  p:close()
  return n
end

local function suicide()
  local f = io.open("/proc/self/stat")
  local pid = f:read("a"):match("^(%d+)")
  f:close()
  os.execute("kill -9 " .. pid)
  local t = os.clock()
  while os.clock() - t < 5 do end -- the signal arrives meanwhile
end

describe("worker deaths (1)", function()
  it("a pool keeps serving after more deaths than CPUs, with parked workers woken", function()
    local p <close> = suiro.pool { workers = 2, respawn = true, timeout = "10s" }
    for _ = 1, 6 do
      local ok, err = pcall(function() return p:submit(suicide):collect() end)
      assert.is_false(ok)
      assert.are.equal("worker_died", err.class)
      assert.is_number(err.slot)
      assert.is_number(err.pid)
    end
    wait_until(function()
      local st = p:status()
      local parked, idle = 0, 0
      for _, w in ipairs(st.workers) do
        if w.state == "idle" then idle = idle + 1 end
        if w.parked then parked = parked + 1 end
      end
      return idle == 2 and parked == 2
    end, 10, "every worker to be parked")
    for i = 1, 20 do assert.are.equal(i + 1, p:submit(function(x) return x + 1 end, i):collect(5)) end
  end)

  it("a death inside a map fails it at once with the element, slot and pid", function()
    local p <close> = suiro.pool { workers = 2, respawn = true }
    local m = p:map(function(i)
      if i == 7 then
        local f = io.open("/proc/self/stat")
        local pid = f:read("a"):match("^(%d+)")
        f:close()
        os.execute("kill -9 " .. pid)
        local t = os.clock()
        while os.clock() - t < 5 do end
      end
      local t = os.clock()
      while os.clock() - t < 0.005 do end
      return i
    end, suiro.range(1, 400), { template = "f64" })
    local ok, err = pcall(m.collect, m, 30)
    assert.is_false(ok)
    assert.are.equal("worker_died", err.class)
    assert.are.equal(7, err.index)
    assert.is_number(err.slot)
    assert.is_number(err.pid)
    local done = m:progress()
    assert.is_true(done < 300, "reported after " .. done .. " of 400 elements") -- not after the survivors finished
  end)
end)

describe("handles outlive their pool (2)", function()
  local function spin_map(p, n)
    return p:map(function(x) local t = os.clock() while os.clock() - t < 0.01 do end return x end,
      suiro.range(1, n or 100000), { template = "f64" })
  end

  it("a running map answers closed after pool:stop()", function()
    local p = suiro.pool { workers = 2 }
    local m = spin_map(p)
    p:stop(0.2)
    local v, why = m:collect(1)
    assert.is_nil(v)
    assert.are.equal("closed", why)
    assert.is_true(m:ready())
    assert.is_number((m:progress()))
    assert.matches("closed", tostring(m))
    assert.is_false(m:cancel())
    assert.has_error(function() for _ in m:results() do end end, "map:results: the map's pool was stopped")
    m:free() -- and its finalizer, later, finds nothing to do
    collectgarbage()
  end)

  it("a <close> pool leaves an uncollected map that is collected later", function()
    local m
    do
      local p <close> = suiro.pool { workers = 1 }
      m = spin_map(p)
    end
    local v, why = m:collect(1)
    assert.is_nil(v)
    assert.are.equal("closed", why)
    m:free()
  end)

  it("a streaming map stopped under its iterator raises a clear error", function()
    local p = suiro.pool { workers = 2 }
    local it = p:map(function(x) local t = os.clock() while os.clock() - t < 0.002 do end return x end,
      suiro.range(1, 100000), { stream = true }):results()
    local i = it()
    assert.is_number(i)
    p:stop(0.2)
    assert.has_error(function() for _ in it do end end, "map:results: the map's pool was stopped")
  end)

  it("pool:stop() from a progress callback ends the map with nil, \"closed\"", function()
    local p = suiro.pool { workers = 2 }
    local calls = 0
    local m = p:map(function(x) local t = os.clock() while os.clock() - t < 0.002 do end return x end,
      suiro.range(1, 20000), { template = "f64", progress = function() calls = calls + 1; p:stop(0.2) end })
    local v, why = m:collect(20)
    assert.is_nil(v)
    assert.are.equal("closed", why)
    assert.is_true(calls >= 1)
  end)

  it("prepared maps and tasks answer closed; finished ones keep nothing broken", function()
    local p = suiro.pool { workers = 1 }
    local pm = p:map_prepare(function(x) return x end, suiro.f64 { 1, 2 }, { template = "f64" })
    local t = p:submit(function() local t0 = os.clock() while os.clock() - t0 < 5 do end end)
    p:stop(0.1)
    local v, why = pm:run()
    assert.is_nil(v)
    assert.are.equal("closed", why)
    v, why = t:collect(1)
    assert.is_nil(v)
    assert.are.equal("closed", why)
    assert.is_true(t:ready())
  end)
end)

describe("sizes are checked before use (3)", function()
  local p = suiro.pool { workers = 1 }
  teardown(function() p:stop() end)

  it("refuses ranges and maps that cannot exist", function()
    assert.has_error(function() suiro.range(math.mininteger, math.maxinteger) end,
      "suiro.range: -9223372036854775808 to 9223372036854775807 by 1 has more than 2^48 - 1 elements")
    assert.has_error(function() suiro.range(1, math.maxinteger) end)
    local ok, err = pcall(p.map, p, function(x) return x end, suiro.range(1, 1 << 40), { template = "f64" })
    assert.is_false(ok)
    assert.matches("reliability_spec.lua:%d+: pool:map: 1099511627776 elements need 8.0 TiB of shared memory", err)
    assert.are.equal(5, #suiro.range(-2, 2))
    local top = suiro.range(math.maxinteger - 2, math.maxinteger)
    assert.are.equal(math.maxinteger, top[3])
  end)

  it("refuses huge n fields and huge arrays with clear messages", function()
    local ok, err = pcall(p.submit, p, function(x) return x end, { 1, n = 1 << 40 })
    assert.is_false(ok)
    assert.matches("argument 2: field n = 1099511627776 claims", err)
    ok, err = pcall(suiro.array, "f64", 1 << 60)
    assert.is_false(ok)
    assert.matches("suiro.array: 1152921504606846976 elements are too many %(at most 2^48 %- 1%)", err)
  end)
end)

describe("references inside messages (4)", function()
  it("a forged reference is checked against the region and its family", function()
    local p <close> = suiro.pool { workers = 1 }
    local region = p:status().region
    local huge = suiro.wire.ref { name = region, type = "f64", offset = 64, length = 8 * 100000000000 }
    local ok, err = pcall(function() return p:submit(function(a) return #a end, huge):collect(5) end)
    assert.is_false(ok)
    assert.matches("is not a suiro shared value", err.message) -- the pool's own region holds no arrays
    local foreign = suiro.wire.ref { name = "/suiro_1_2_3", type = "f64", offset = 64, length = 8 }
    ok, err = pcall(function() return p:submit(function(a) return #a end, foreign):collect(5) end)
    assert.is_false(ok)
    assert.matches("another pool family", err.message)
    assert.are.equal(3, p:submit(function(a, b) return a + b end, 1, 2):collect(5))
  end)
end)

describe("map timeouts bound the wait (5)", function()
  local p = suiro.pool { workers = 1, timeout = "1s" }
  teardown(function() p:stop(0.1) end)
  local function forever() local t = os.clock() while os.clock() - t < 1e9 do end end

  it("returns nil, 'timeout' on time from collect, the option and the pool's timeout", function()
    local m = p:map(forever, { 1 })
    local t0 = suiro.now()
    local v, why = m:collect(0.3)
    assert.is_nil(v)
    assert.are.equal("timeout", why)
    assert.is_true(suiro.now() - t0 < 3)
    t0 = suiro.now()
    why = select(2, m:collect()) -- the pool's timeout
    assert.are.equal("timeout", why)
    assert.is_true(suiro.now() - t0 < 4)
    m:kill()
    local m2 = p:map(forever, { 1 }, { timeout = "300ms" })
    t0 = suiro.now()
    why = select(2, m2:collect())
    assert.are.equal("timeout", why)
    assert.is_true(suiro.now() - t0 < 3)
    m2:kill()
    assert.has_error(function() m2:collect(10) end)
  end)

  it("leaves the map collectable again", function()
    local m = p:map(function(x) local t = os.clock() while os.clock() - t < 0.5 do end return x * 2 end, { 21 },
      { template = "f64" })
    assert.are.equal("timeout", select(2, m:collect(0.05)))
    assert.are.equal(42, m:collect(10)[1])
  end)
end)

describe("the reaper asks the kernel, not the pid (6)", function()
  it("keeps the pools of a live host in another PID namespace", function()
    if os.execute("unshare --pid --fork --mount-proc true 2>/dev/null") ~= true then
      error("unshare --pid is needed for this test (run the suite as root)")
    end
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(([[
      local suiro = require "suiro"
      local p = suiro.pool { workers = 1 }
      io.stdout:write(p:status().region, "\n") io.stdout:flush()
      local t0 = suiro.now()  -- until the parent says stop (bounded)
      while not io.open("%s.stop") and suiro.now() - t0 < 30 do os.execute("sleep 0.01") end
    ]]):format(script))
    f:close()
    local bin = support.root .. "/build/bin/suiro"
    os.execute(("timeout 60 unshare --pid --fork --mount-proc %s run %s > %s.out 2>&1 &"):format(bin, script, script))
    local region
    wait_until(function()
      local o = io.open(script .. ".out")
      region = o and o:read("l")
      if o then o:close() end
      return region and region:match("^/suiro_")
    end, 20, "the namespaced host")
    assert.is_truthy(io.open("/dev/shm" .. region))
    suiro.reap()
    local still = io.open("/dev/shm" .. region)
    assert.is_truthy(still, "the reaper removed a live pool of another PID namespace")
    still:close()
    io.open(script .. ".stop", "w"):close()
    wait_until(function() return not io.open("/dev/shm" .. region) end, 20, "the namespaced host to stop")
    os.remove(script)
    os.remove(script .. ".out")
    os.remove(script .. ".stop")
  end)
end)

describe("frames with big columns (7)", function()
  it("cross both ways by reference", function()
    local p <close> = suiro.pool { workers = 1 }
    local x = suiro.f64(5000)
    for i = 1, #x do x[i] = i end
    local f = suiro.frame { { "x", x }, { "n", suiro.i32(8192) and suiro.i32(5000) } }
    local s, g = p:submit(function(fr) return fr.x:sum(), fr end, f):collect(10)
    assert.are.equal(5000 * 5001 / 2, s)
    assert.is_true(g.x:isview())
    local m = p:map(function(i) return { a = i, b = i } end, suiro.range(1, 5000), { template = "{a: f64, b: i32}" })
      :collect(10)
    assert.are.equal(2 * (5000 * 5001 / 2), p:submit(function(fr) return fr.a:sum() + fr.b:sum() end, m):collect(10))
  end)
end)

describe("dropped tasks give their slots back (8)", function()
  it("accepts 1000 dropped submits with 64 result slots", function()
    local p <close> = suiro.pool { workers = 1, result_slots = 64, timeout = "10s" }
    for i = 1, 1000 do assert.is_not_nil(p:submit(function(x) return x end, i)) end
    assert.are.equal(7, p:submit(function() return 7 end):collect(10))
  end)
end)

describe("kill (10)", function()
  it("stops a runaway task and a runaway map; the pool keeps its workers", function()
    local p <close> = suiro.pool { workers = 2, respawn = false }
    local t = p:submit(function() while true do end end)
    wait_until(function()
      for _, w in ipairs(p:status().workers) do if w.state == "busy" then return true end end
    end, 10, "the task to start")
    assert.is_true(t:kill())
    local ok, err = pcall(t.collect, t, 10)
    assert.is_false(ok)
    assert.are.equal("cancelled", err.class)
    local m = p:map(function() while true do end end, suiro.range(1, 4))
    assert.are.equal("timeout", select(2, m:collect(0.2)))
    assert.is_true(m:kill())
    ok, err = pcall(m.collect, m, 10)
    assert.is_false(ok)
    assert.are.equal("cancelled", err.class)
    assert.are.equal(2, p:status().live)
    assert.are.equal(5, p:submit(function() return 5 end):collect(10))
  end)
end)

describe("abnormal ends leave nothing behind (12)", function()
  local bin = support.root .. "/build/bin/suiro"
  local function run(body, how)
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
      local suiro = require "suiro"
      local pool = suiro.pool { workers = 2 }
      local big = pool:submit(function() return suiro.f64(100000) end):collect()
      io.stdout:write("ready\n") io.stdout:flush()
    ]] .. body)
    f:close()
    local out = script .. ".out"
    local pid = tonumber((support.sh(("%s run %s > %s 2>&1 & echo $!"):format(bin, script, out))))
    wait_until(function()
      local o = io.open(out)
      local s = o and o:read("a")
      if o then o:close() end
      return s and s:find("ready")
    end, 20, "the script")
    assert.is_true(shm_of(pid) > 0)
    if how then os.execute(("kill -%s %d"):format(how, pid)) end
    local ok, err = pcall(function()
      wait_until(function() return not io.open("/proc/" .. pid .. "/cmdline") or shm_of(pid) == 0 end, 10, "exit")
      wait_until(function() return shm_of(pid) == 0 end, 2, "nothing left of " .. pid)
    end)
    os.execute("kill -9 " .. pid .. " 2>/dev/null")
    os.remove(script)
    os.remove(out)
    assert(ok, err)
  end

  it("after Ctrl-C", function() run("pool:submit(function() while true do end end):collect()", "INT") end)
  it("after SIGTERM", function() run("pool:submit(function() while true do end end):collect()", "TERM") end)
  it("after os.exit(0)", function() run("os.execute('sleep 0.5') os.exit(0)") end)
  it("after an error", function() run("os.execute('sleep 0.5') error('boom')") end)
  it("within 2 s of SIGKILL", function() run("while true do end", "KILL") end)
end)

describe("a worker's own pool (13)", function()
  it("cannot be stopped by a task, and nested submits keep working", function()
    local p <close> = suiro.pool { workers = 1 }
    local ok, err = pcall(function() return p:submit(function() suiro.current_pool():stop() end):collect(5) end)
    assert.is_false(ok)
    assert.matches("a worker cannot stop its own pool", err.message)
    assert.are.equal(3, p:submit(function()
      return suiro.current_pool():submit(function() return 3 end):collect(5)
    end):collect(10))
  end)

  it("suiro.spawn after a failed suiro.run is refused", function()
    assert.has_error(function() suiro.run(function() error("x") end) end)
    assert.has_error(function() suiro.spawn(function() end) end, nil)
    local ok, err = pcall(suiro.spawn, function() end)
    assert.is_false(ok)
    assert.matches("only inside suiro.run", err)
  end)
end)

describe("durations and sizes everywhere (14)", function()
  local p = suiro.pool { workers = 1, slot_size = "512B", result_size = "4KiB" }
  teardown(function() p:stop() end)

  it("accepts duration strings in every timeout", function()
    assert.are.equal(1, p:submit(function() return 1 end):collect("250ms"))
    local ts = p:submit_batch(function(x) return x end, { { 1 }, { 2 } })
    assert.same({ 1, 2 }, p:collect_all(ts, "2s"))
    ts = p:submit_batch(function(x) return x end, { { 1 } })
    assert.are.equal(1, (p:collect_any(ts, "1s")))
    assert.are.equal(2, p:map(function(x) return x end, { 2 }, { template = "f64" }):collect("2s")[1])
  end)

  it("refuses NaN, negative and malformed timeouts naming them", function()
    local t = p:submit(function() return 1 end)
    assert.has_error(function() t:collect(0 / 0) end)
    assert.has_error(function() t:collect(-math.huge) end)
    local ok, err = pcall(t.collect, t, "soon")
    assert.is_false(ok)
    assert.matches('task:collect: timeout: bad duration "soon"', err)
    assert.are.equal(1, t:collect(5))
  end)
end)

describe("misuse names the caller's line (15)", function()
  it("points at this file", function()
    local p <close> = suiro.pool { workers = 1 }
    local ok, err = pcall(function() return p:map(5, {}) end)
    assert.is_false(ok)
    assert.matches("^tests/lua/reliability_spec.lua:%d+: pool:map: argument 1", err)
    for _, bad in ipairs { "a..b", "a.b.", "1abc", "" } do
      ok, err = pcall(p.submit, p, bad)
      assert.is_false(ok, bad)
      assert.matches("pool:submit: argument 1: bad function reference", err)
    end
  end)
end)

describe("messages (16)", function()
  local p = suiro.pool { workers = 1 }
  teardown(function() p:stop() end)

  it("name what is wrong", function()
    local _, err = pcall(p.submit, p, function(x) return x end, { [1] = 1, [3] = 3 })
    assert.matches("list with holes %(key 3 but no key 2%)", err)
    local ok
    _, err = pcall(p.submit, p, function(x) return x end, { [1e15] = 1 })
    assert.matches("list with holes", err)
    ok, err = pcall(function() return p:map(function(x) return x end, { 300 }, { template = "u8" }):collect(5) end)
    assert.is_false(ok)
    assert.matches("element 1: template u8 cannot hold 300$", err.message)
    ok, err = pcall(function() return p:submit(function() return function() end end):collect(5) end)
    assert.is_false(ok)
    assert.matches("a function cannot be returned from a task", err.message)
    _, err = pcall(function() return p:submit(function() error({ code = 42 }) end):collect(5) end)
    assert.are.equal(42, err.value.code)
    ok, err = pcall(function() return p:submit(suicide):collect(5) end)
    assert.is_false(ok)
    assert.matches("^worker died: worker %d+ %(pid %d+%) was killed by signal 9", tostring(err))
  end)
end)

describe("integers and options are range-checked (17)", function()
  it("refuses what would be truncated or ignored", function()
    local p <close> = suiro.pool { workers = 1, name = "ingest" }
    assert.are.equal("ingest", p:status().name)
    assert.has_error(function() p:retire(math.mininteger) end,
      "pool:retire: slot must be in 0..63, got -9223372036854775808")
    assert.has_error(function() p:spawn(1 << 31) end, "pool:spawn: n must be in 1..64, got 2147483648")
    for _, opts in ipairs {
      { max_workers = -1 }, { env = { A = {} } }, { env = { A = "x\0y" } }, { env = { ["A=B"] = "x" } },
      { respawn = "yes" }, { name = 5 }, { workers = 1.5 }, { slot_size = "3KiB" },
    } do
      assert.has_error(function() suiro.pool(opts) end)
    end
  end)

  it("passes only the documented environment to workers", function()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write([[
      local suiro = require "suiro"
      local p <close> = suiro.pool { workers = 1, env = { MINE = "yes" } }
      print(p:submit(function() return tostring(os.getenv("SUIRO_SECRET")) .. " " .. tostring(os.getenv("LC_SECRET"))
        .. " " .. tostring(os.getenv("MINE")) end):collect(10))
    ]])
    f:close()
    local out = support.sh(("SUIRO_SECRET=1 LC_SECRET=2 %s/build/bin/suiro run %s"):format(support.root, script))
    os.remove(script)
    assert.are.equal("nil nil yes\n", out)
  end)
end)

describe("a worker's own pools share its family's trust (issue 18 item 9)", function()
  it("passes shared arrays and spilled messages three pools deep, down and back up", function()
    local p <close> = suiro.pool { workers = 1 }
    -- each level sends an 80 KB array (a shared region) and a 4 KB string (over a queue slot)
    -- to a pool of its own, and returns what came back with its own additions
    local function level(depth, a, s)
      local S = require "suiro" -- in the worker: its own module, not the host's upvalue
      if depth == 0 then return a:sum(), #s, S.array("f64", 10000) + 1 end
      local q <close> = S.pool { workers = 1 }
      local out = {}
      for i = 1, 3 do -- the second and later sends reuse regions
        local sum, len, back = q:submit(level, depth - 1, a, s .. "x"):collect(30)
        out[i] = { sum, len, back:sum() }
      end
      return out[3][1], out[3][2], S.array("f64", 10000) + (out[1][3] / 10000 + 1)
    end
    local a = suiro.array("f64", 10000) + 2
    for _ = 1, 2 do
      local sum, len, back = p:submit(level, 3, a, ("s"):rep(4096)):collect(60)
      assert.are.equal(20000, sum)
      assert.are.equal(4096 + 3, len)
      assert.are.equal(10000 * 4, back:sum()) -- 1 at the bottom, +1 at each of the three levels above
    end
  end)
end)
