-- tests/mpi/cluster.lua: the MPI tier under mpirun -np 3 (rank 0 runs this, ranks 1 and 2 serve).
-- Prints "ok name" / "FAIL name: why" per test and a last line "cluster: N passed, M failed".
-- Every wait is bounded: collects take timeouts, and the driver runs mpirun under timeout.
local suiro = require "suiro"

local passed, failed = 0, 0
local function test(name, f)
  local t0 = suiro.now()
  local ok, err = pcall(f)
  if ok then
    passed = passed + 1
    print(("ok   %s (%.2f s)"):format(name, suiro.now() - t0))
  else
    failed = failed + 1
    print("FAIL " .. name .. ": " .. tostring(err))
  end
  io.stdout:flush()
end
local function eq(a, b, what)
  if a ~= b then error(("%s: expected %s, got %s"):format(what or "value", tostring(b), tostring(a)), 2) end
end

local pool <close> = suiro.pool { backend = "mpi", workers = 2, timeout = "60s" }

-- a worker kills itself (SIGKILL) when it runs on `rank`
local function die_on(rank)
  return function(x)
    if os.getenv("SUIRO_MPI_RANK") == rank then
      local f = io.open("/proc/self/stat")
      local pid = f:read("n")
      f:close()
      os.execute("kill -9 " .. pid)
    end
    return x
  end
end

local function sent_to(rank)
  for _, h in ipairs(pool:status().hosts) do
    if h.rank == rank then return h.bytes_sent end
  end
end

test("three hosts, two workers each", function()
  local hosts = pool:status().hosts
  eq(#hosts, 3, "hosts")
  for i, h in ipairs(hosts) do
    eq(h.rank, i - 1, "rank")
    eq(#h.workers, 2, "workers of rank " .. h.rank)
    eq(h.live, 2, "live workers of rank " .. h.rank)
    assert(type(h.host) == "string" and h.host ~= "" and h.host ~= "?", "host name")
  end
  eq(pool:status().backend, "mpi", "backend")
  local nodes = pool:status().nodes -- the tier's hosts are nodes (the same list; node = host)
  eq(#nodes, 3, "nodes")
  for i, nd in ipairs(nodes) do eq(nd.node, hosts[i].host, "node " .. i .. "'s name") end
end)

test("tasks go to every host", function()
  local tasks = {}
  for i = 1, 9 do tasks[i] = pool:submit(function() return os.getenv("SUIRO_MPI_RANK") end) end
  local seen = {}
  for _, t in ipairs(tasks) do seen[assert(t:collect(30))] = true end
  assert(seen["0"] and seen["1"] and seen["2"], "ranks that ran tasks: " .. table.concat((function()
    local r = {}
    for k in pairs(seen) do r[#r + 1] = k end
    return r
  end)(), ","))
end)

test("a slow host takes fewer elements (ranges are dealt as hosts ask, not split up front)", function()
  local r = pool:map(function()
    local rank = os.getenv("SUIRO_MPI_RANK")
    local t = suiro.now()
    while suiro.now() - t < (rank == "1" and 0.004 or 0.0002) do end -- rank 1 is 20x slower
    return rank
  end, suiro.range(1, 3000)):collect(60)
  local by = {}
  for i = 1, #r do by[r[i]] = (by[r[i]] or 0) + 1 end
  assert((by["1"] or 0) < 600,
    ("rank 1 ran %d of 3000 elements (a third would be a static split)"):format(by["1"] or 0))
  assert((by["0"] or 0) + (by["2"] or 0) > 2400, "the fast hosts took the rest")
end)

test("a worker killed on rank 1 fails only its task", function()
  local tasks = pool:submit_batch(die_on("1"), { { 1 }, { 2 }, { 3 }, { 4 }, { 5 }, { 6 } })
  local died, fine = 0, 0
  for _, t in ipairs(tasks) do
    local ok, v = pcall(t.collect, t, 30)
    if ok then
      fine = fine + 1
    else
      died = died + 1
      eq(v.class, "worker_died", "class")
      assert(v.message:find("rank 1", 1, true), "the message names the host: " .. v.message)
      assert(v.message:find("signal 9", 1, true), "the message names the signal: " .. v.message)
    end
  end
  eq(died, 2, "tasks that died (round robin: two of six on rank 1)")
  eq(fine, 4, "tasks that ran")
  -- rank 1 replaced its workers and serves again
  local again = pool:submit_batch(function(x) return x * 10 end, { { 1 }, { 2 }, { 3 } })
  eq(table.concat(pool:collect_all(again, 30), ","), "10,20,30", "after the deaths")
end)

test("a worker killed on rank 2 fails the map with its element, the pool keeps serving", function()
  local ok, err = pcall(function()
    return pool:map(die_on("2"), suiro.range(1, 3000), { template = "f64" }):collect(60)
  end)
  assert(not ok, "the map failed")
  eq(err.class, "worker_died", "class")
  assert(math.type(err.index) == "integer" and err.index >= 1 and err.index <= 3000, "index " .. tostring(err.index))
  assert(err.message:find("rank 2", 1, true), "the message names the host: " .. err.message)
  local r = pool:map(function(x) return x end, suiro.range(1, 3000), { template = "f64" }):collect(60)
  eq(r:sum(), 4501500.0, "the next map")
end)

test("remote errors keep their raised value", function()
  local tasks = {}
  for i = 1, 3 do tasks[i] = pool:submit(function(k) error({ code = 40 + k }) end, i) end
  for i, t in ipairs(tasks) do
    local ok, e = pcall(t.collect, t, 30)
    assert(not ok)
    eq(e.class, "remote", "class")
    eq(e.value.code, 40 + i, "raised value")
  end
end)

test("a function's code goes once per host", function()
  -- a 40 kB constant inside the function's code (not a captured value, which travels each time)
  local f = load("return function(k) return #'" .. ("x"):rep(40000) .. "' + k end")()
  local before = sent_to(1)
  local tasks = {}
  for i = 1, 60 do tasks[i] = pool:submit(f, i) end
  for i, t in ipairs(tasks) do eq(t:collect(30), 40000 + i, "task " .. i) end
  local delta = sent_to(1) - before
  -- 20 tasks reached rank 1: their code once is ~40 kB, twenty times would be 800 kB
  assert(delta > 40000 and delta < 120000, "bytes sent to rank 1: " .. delta)
end)

test("a large argument goes once per host, and again when it changes", function()
  local big = suiro.array("f64", 1000000) -- 8 MB
  for i = 1, #big do big[i] = i end
  local before = sent_to(2)
  local tasks = {}
  for i = 1, 30 do tasks[i] = pool:submit(function(a, k) return a:sum() + k, a[1] end, big, i) end
  for i, t in ipairs(tasks) do eq(t:collect(60), 500000500000 + i, "task " .. i) end
  local delta = sent_to(2) - before
  assert(delta > 8e6 and delta < 8.5e6, "bytes sent to rank 2 for 10 tasks: " .. delta)
  big[1] = 1000001 -- copy on write: a new value, so it travels again
  local t2 = {}
  for i = 1, 3 do t2[i] = pool:submit(function(a) return a[1] end, big) end
  for _, t in ipairs(t2) do eq(t:collect(60), 1000001.0, "the changed value") end
end)

test("a map function's captured large value goes once per host", function()
  local table_ = suiro.array("f64", 500000) -- 4 MB, captured
  for i = 1, #table_ do table_[i] = i end
  local before = sent_to(1)
  for _ = 1, 3 do
    local r = pool:map(function(i) return table_[i] end, suiro.range(1, 500000), { template = "f64" }):collect(60)
    eq(r:sum(), 125000250000.0, "sum")
  end
  local delta = sent_to(1) - before
  assert(delta > 4e6 and delta < 6e6, "bytes sent to rank 1 for three maps: " .. delta)
end)

test("large results come back from every host", function()
  local arrays = pool:map(function(i)
    local a = suiro.array("f64", 100000)
    for k = 1, #a do a[k] = i end
    return a
  end, suiro.range(1, 9)):collect(60)
  for i = 1, 9 do eq(arrays[i]:sum(), 100000.0 * i, "array " .. i) end
  local tasks = {}
  for i = 1, 3 do tasks[i] = pool:submit(function(n) return suiro.array("i64", n) + 7 end, 200000) end
  for _, t in ipairs(tasks) do eq(t:collect(30):sum(), 1400000, "task result") end
end)

test("a million elements, typed and untyped", function()
  local t0 = suiro.now()
  local r = pool:map(function(x) return x * 0.5 end, suiro.range(1, 1000000), { template = "f64" }):collect(120)
  eq(#r, 1000000, "length")
  eq(r:sum(), 250000250000.0, "sum")
  local u = pool:map(function(x) return x % 3 end, suiro.range(1, 1000000)):collect(120)
  eq(#u, 1000000, "untyped length")
  local s = 0
  for i = 1, #u do s = s + u[i] end
  eq(s, 1000000, "untyped sum")
  assert(suiro.now() - t0 < 60, "took " .. (suiro.now() - t0) .. " s")
end)

test("cancel and kill end a running map; the pool serves on", function()
  local slow = function(x)
    local t = os.clock()
    while os.clock() - t < 0.005 do end
    return x
  end
  local m = pool:map(slow, suiro.range(1, 20000), { template = "f64" })
  assert(m:cancel(), "cancel of a running map")
  local ok, e = pcall(m.collect, m, 30)
  assert(not ok)
  eq(e.class, "cancelled", "class after cancel")
  local k = pool:map(slow, suiro.range(1, 20000), { template = "f64" })
  assert(k:kill(), "kill of a running map")
  ok, e = pcall(k.collect, k, 30)
  assert(not ok)
  eq(e.class, "cancelled", "class after kill")
  local after = pool:map(function(x) return x end, suiro.range(1, 100), { template = "f64" })
  eq(after:collect(30):sum(), 5050.0, "next map")
end)

test("collect timeouts leave the map running", function()
  local m = pool:map(function(x)
    local t = os.clock()
    while os.clock() - t < 0.002 do end
    return x
  end, suiro.range(1, 1500), { template = "f64" })
  local v, why = m:collect(0.01)
  eq(v, nil, "value")
  eq(why, "timeout", "outcome")
  eq(m:collect(60):sum(), 1125750.0, "collected later")
end)

test("progress reaches the end; streams hand out every element", function()
  local last
  local function note(d, n) last = { d, n } end
  pool:map(function(x) return x end, suiro.range(1, 5000), { template = "f64", progress = note }):collect(30)
  eq(last[1], 5000, "done")
  eq(last[2], 5000, "n")
  local seen = {}
  local m = pool:map(function(x) return -x end, suiro.range(1, 4000), { stream = true, template = "i64" })
  for i, v in m:results() do
    assert(not seen[i], "element " .. i .. " twice")
    seen[i] = true
    eq(v, -i, "element " .. i)
  end
  eq(#seen, 4000, "elements streamed")
end)

test("progress moves while the first ranges run, from the serving ranks' reports", function()
  -- every element but a serving rank's worker's first waits for the gate: no range completes
  -- until the script opens it, so only the serving ranks' reports of running ranges can move
  -- progress (rank 0's elements all wait)
  local gate = os.tmpname()
  os.remove(gate)
  local m = pool:map(function(x)
    if os.getenv("SUIRO_MPI_RANK") ~= "0" and not _G.progress_test_first then
      _G.progress_test_first = true
      return x
    end
    local t = os.clock()
    while os.clock() - t < 30 do
      local f = io.open(gate)
      if f then f:close(); break end
      local t1 = os.clock()
      while os.clock() - t1 < 0.001 do end
    end
    return x
  end, suiro.range(1, 60000), { template = "f64" })
  local seen, t0 = 0, suiro.now()
  while seen == 0 and suiro.now() - t0 < 20 do
    seen = m:progress()
    if seen == 0 then os.execute("sleep 0.01") end
  end
  io.open(gate, "w"):close()
  local r = m:collect(60)
  os.remove(gate)
  assert(seen >= 1 and seen <= 4, "progress before any range completed: " .. seen .. " (want 1..4)")
  eq(r:sum(), 60000 * 60001 / 2, "the map's sum")
  eq((m:progress()), 60000, "progress at the end")
end)

test("the progress callback fires when the count changes, at most every 50 ms", function()
  local calls = {}
  pool:map(function(x)
    local t = os.clock()
    while os.clock() - t < 0.0002 do end
    return x
  end, suiro.range(1, 20000), { template = "f64", progress = function(d) calls[#calls + 1] = { d, suiro.now() } end })
    :collect(60)
  assert(#calls >= 1, "no call")
  eq(calls[#calls][1], 20000, "the last call")
  for i = 2, #calls - 1 do
    assert(calls[i][1] > calls[i - 1][1], ("call %d repeats %d"):format(i, calls[i][1]))
    local gap = calls[i][2] - calls[i - 1][2]
    assert(gap >= 0.04, ("calls %d and %d %.3f s apart"):format(i - 1, i, gap))
  end
end)

test("collect_any and collect_all over hosts", function()
  local tasks = {}
  for i = 1, 6 do
    tasks[i] = pool:submit(function(k)
      local t = os.clock()
      while os.clock() - t < (k == 5 and 0 or 0.3) do end
      return k
    end, i)
  end
  local i, v = pool:collect_any(tasks, 30)
  eq(i, 5, "the quick task")
  eq(v, 5, "its value")
  table.remove(tasks, 5)
  eq(table.concat(pool:collect_all(tasks, 30), ","), "1,2,3,4,6", "the rest")
end)

test("task:cancel before it starts, task:kill while it runs", function()
  local block = function()
    local t = os.clock()
    while os.clock() - t < 1 do end
    return "done"
  end
  local blockers = {}
  for i = 1, 6 do blockers[i] = pool:submit(block) end -- two per host: every worker busy
  local queued = {}
  for i = 1, 3 do queued[i] = pool:submit(function() return "ran" end) end -- one per host
  local host_of = require("suiro.mpi").load().task_host -- nil for rank 0's own tasks
  local remote = 0
  for _, t in ipairs(queued) do -- cancelled at once, while the blockers hold every worker
    if host_of(t) then
      remote = remote + 1
      assert(t:cancel(), "cancel of a queued task on rank " .. host_of(t))
    end
  end
  eq(remote, 2, "tasks on the other hosts")
  local victim -- a running blocker on rank 1, killed while it runs
  for _, t in ipairs(blockers) do if host_of(t) == 1 then victim = victim or t end end
  assert(victim:kill())
  for _, t in ipairs(queued) do
    if host_of(t) then
      local ok, e = pcall(t.collect, t, 30)
      assert(not ok, "a cancelled task raises")
      eq(e.class, "cancelled", "class")
    else
      eq(t:collect(30), "ran", "the local one")
    end
  end
  local ok, e = pcall(victim.collect, victim, 30)
  assert(not ok)
  eq(e.class, "cancelled", "killed")
  for k, t in ipairs(blockers) do
    if t ~= victim then eq(t:collect(30), "done", "blocker " .. k) end
  end
  local after = pool:submit(function() return 1 end)
  local t0 = suiro.now()
  local v, why = after:collect(30)
  eq(v, 1, ("after the kill (%s after %.1f s, on rank %s)"):format(tostring(why), suiro.now() - t0,
    tostring(host_of(after) or 0)))
end)

test("tasks of a stopped pool say closed", function()
  local p = suiro.pool { backend = "mpi", workers = 1 }
  local tasks = {}
  for i = 1, 3 do tasks[i] = p:submit(function() local t = os.clock() while os.clock() - t < 0.5 do end end) end
  p:stop()
  for i = 2, 3 do
    local v, why = tasks[i]:collect(5)
    eq(v, nil, "value")
    eq(why, "closed", "outcome")
  end
end)

test("bad options are refused with their name", function()
  local ok, e = pcall(suiro.pool, { backend = "cluster" })
  assert(not ok)
  assert(tostring(e):find('suiro.pool: backend: must be "local" or "mpi", got "cluster"', 1, true), tostring(e))
  ok, e = pcall(suiro.pool, { backend = "mpi", workers = -1 })
  assert(not ok)
  assert(tostring(e):find("workers", 1, true), tostring(e))
end)

-- the processes of this job, for the driver's check that none is left once it ends
local pids = {}
for _, h in ipairs(pool:status().hosts) do
  pids[#pids + 1] = h.pid
  for _, w in ipairs(h.workers) do pids[#pids + 1] = w.pid end
end
print("pids " .. table.concat(pids, " "))
print(("cluster: %d passed, %d failed"):format(passed, failed))
