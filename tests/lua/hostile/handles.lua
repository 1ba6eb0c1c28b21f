-- Handles used wrongly: after their pool stopped (issue 8 item 2: every handle outlives its pool
-- and answers nil, "closed" or a clear error), with the wrong self, twice; pools stopped from
-- callbacks and coroutines; spawn/retire with bad numbers (item 17); collect_all/collect_any
-- misuse (items 11, 16); kill (item 10), cancelled maps (item 9), worker deaths (item 1), map
-- timeouts (item 5), stop from a task (item 13).
local H = require "tests.lua.hostile"
local V = require "tests.lua.hostile.values"

local cases = {}
local function add(c) c.deadline = c.deadline or 10; cases[#cases + 1] = c end

local CLOSED = H.closed_or("stopped", "closed")

-- handles of a pool that has stopped: how each was made, and what each method must answer
local function stopped_pool_with(E, make)
  local p = E.suiro.pool { workers = 1, timeout = "5s" }
  local h = make(E, p)
  p:stop()
  return h, p
end
local task_kinds = {
  { "a pending task", function(E, p)
    local t = p:submit(E.F.sleep, 0.3)
    return t
  end },
  { "a finished, uncollected task", function(E, p)
    local t = p:submit(E.F.one)
    while not t:ready() do end
    return t
  end },
  { "a batch task", function(E, p) return p:submit_batch(E.F.id, { { 1 }, { 2 } })[2] end },
}
local task_methods = {
  { "collect()", function(t) return t:collect() end, CLOSED },
  { "collect(0)", function(t) return t:collect(0) end, CLOSED },
  { "await()", function(t) return t:await() end, CLOSED },
  { "await() inside suiro.run", function(t, E) return E.suiro.run(function() return t:await(1) end) end, CLOSED },
  { "ready()", function(t) return t:ready() end, H.any_of(H.returns(true), H.returns(false)) },
  { "cancel()", function(t) return t:cancel() end, H.returns(false) },
  { "release()", function(t) return t:release() end, H.returns() },
  { "tostring", function(t) return (tostring(t):match("^suiro%.task")) end, H.returns("suiro.task") },
  { "being collected as garbage", "gc", H.returns(true) },
}
for _, k in ipairs(task_kinds) do
  for _, m in ipairs(task_methods) do
    add {
      name = ("%s of a stopped pool: %s"):format(k[1], m[1]),
      run = function(E)
        local t = stopped_pool_with(E, k[2])
        if m[2] == "gc" then
          t = nil -- luacheck: ignore 311 (dropping the handle is the point)
          collectgarbage()
          collectgarbage()
          return true
        end
        return m[2](t, E)
      end,
      expect = m[3], alone = true,
    }
  end
end

local map_kinds = {
  { "a running map", function(E, p) return p:map(E.F.sleep, { 0.2, 0.2, 0.2, 0.2 }) end },
  { "a finished, uncollected map", function(E, p)
    local m = p:map(E.F.id, { 1, 2 })
    local t0 = E.suiro.now()
    while not m:ready() and E.suiro.now() - t0 < 5 do end
    return m
  end },
  { "a prepared map", function(E, p) return p:map_prepare(E.F.id, E.suiro.f64 { 1, 2 }, { template = "f64" }) end },
  { "a streaming map", function(E, p) return p:map(E.F.sleep, { 0.1, 0.1, 0.1 }, { stream = true }) end },
}
local map_methods = {
  { "collect()", function(m) return m:collect() end, "collect" },
  { "collect(1)", function(m) return m:collect(1) end, "collect" },
  { "await(1)", function(m) return m:await(1) end, "collect" },
  { "progress()", function(m)
    local d, n = m:progress()
    return math.type(d), math.type(n)
  end, H.returns("integer", "integer") },
  { "ready()", function(m) return type(m:ready()) end, H.returns("boolean") },
  { "cancel()", function(m) return m:cancel() end, H.any_of(H.returns(), H.returns(true), H.returns(false)) },
  { "results() loop", function(m)
    for _ in m:results() do end
    return "finished"
  end, H.any_of(H.returns("finished"), H.raises_any("stopped", "closed")) },
  { "run()", function(m) return m:run() end, H.any_of(CLOSED, H.raises_any("stopped", "not a prepared", "prepared map")) },
  { "free()", function(m) return m:free() end, H.returns() },
  { "tostring", function(m) return (tostring(m):match("^suiro%.map")) end, H.returns("suiro.map") },
  { "being collected as garbage", "gc", H.returns(true) },
}
-- collecting: nil, "closed" (issue 8 item 2); a prepared map that never ran may say so instead
local PREPARED_COLLECT = H.any_of(CLOSED, H.raises_any("not running"))
for _, k in ipairs(map_kinds) do
  for _, m in ipairs(map_methods) do
    local expect = m[3]
    if expect == "collect" then expect = k[1] == "a prepared map" and PREPARED_COLLECT or CLOSED end
    add {
      name = ("%s of a stopped pool: %s"):format(k[1], m[1]),
      run = function(E)
        local h = stopped_pool_with(E, k[2])
        if m[2] == "gc" then
          h = nil -- luacheck: ignore 311 (dropping the handle is the point)
          collectgarbage()
          collectgarbage()
          return true
        end
        return m[2](h, E)
      end,
      expect = expect, alone = true, deadline = 8,
    }
  end
end

local pool_methods = {
  { "submit", function(p, E) return p:submit(E.F.one) end, CLOSED },
  { "submit_batch", function(p, E) return p:submit_batch(E.F.id, { { 1 } }) end, CLOSED },
  { "map", function(p, E) return p:map(E.F.id, { 1 }) end, CLOSED },
  { "map_prepare", function(p, E) return p:map_prepare(E.F.id, { 1 }) end, CLOSED },
  { "collect_all of its own task", function(p, _, t) return p:collect_all({ t }, 1) end,
    H.any_of(H.nil_why("closed"), H.raises_any("stopped", "closed", { never = { "another pool" } })) },
  { "collect_any of its own task", function(p, _, t) return p:collect_any({ t }, 1) end,
    H.any_of(H.nil_why("closed"), H.raises_any("stopped", "closed")) },
  { "status", function(p) return p:status() end, H.raises_any("stopped", "closed") },
  { "spawn(1)", function(p) return p:spawn(1) end, H.raises_any("stopped", "closed") },
  { "retire(0)", function(p) return p:retire(0) end, H.raises_any("stopped", "closed") },
  { "stop() again", function(p) return p:stop() end, H.returns() },
  { "tostring", function(p) return tostring(p) end, H.returns("suiro.pool(stopped)") },
}
for _, m in ipairs(pool_methods) do
  add {
    name = ("a stopped pool: %s"):format(m[1]),
    run = function(E)
      local p = E.suiro.pool { workers = 1 }
      local t = p:submit(E.F.one)
      p:stop()
      return m[2](p, E, t)
    end,
    expect = m[3], alone = true,
  }
end
add {
  name = "collect_all on a live pool with a task of a stopped pool names the task",
  run = function(E)
    local p = E.suiro.pool { workers = 1 }
    local t = p:submit(E.F.one)
    p:stop()
    return E.P:collect_all({ t }, 1)
  end,
  expect = H.raises("tasks[1]"), alone = true,
}

-- stopping at awkward moments
add {
  name = "a <close> pool leaving scope with a map uncollected: the map answers closed afterwards",
  run = function(E)
    local m
    do
      local p <close> = E.suiro.pool { workers = 1 }
      m = p:map(E.F.sleep, { 0.05, 0.05, 0.05 })
    end
    collectgarbage()
    return m:collect(2)
  end,
  expect = CLOSED, alone = true,
}
add {
  name = "pool:stop() from a map's progress callback: the map answers closed, the host lives",
  run = function(E)
    local p = E.suiro.pool { workers = 1 }
    local m = p:map(E.F.sleep, { 0.05, 0.05, 0.05, 0.05 }, { progress = function() p:stop() end })
    return m:collect(3)
  end,
  expect = H.any_of(CLOSED, H.raises_any("stopped", "closed")), alone = true,
}
add {
  name = "pool:stop() while iterating a streaming map's results",
  run = function(E)
    local p = E.suiro.pool { workers = 1 }
    local n = 0
    for _ in p:map(E.F.sleep, { 0.05, 0.05, 0.05, 0.05 }, { stream = true }):results() do
      n = n + 1
      p:stop()
    end
    return n
  end,
  expect = H.any_of(H.returns(1), H.raises_any("stopped", "closed")), alone = true,
}
add {
  name = "pool:stop() inside suiro.run while another coroutine awaits one of its tasks: the await answers closed",
  run = function(E)
    local p = E.suiro.pool { workers = 1 }
    local got
    E.suiro.run(function()
      local t = p:submit(E.F.sleep, 0.5)
      E.suiro.spawn(function() got = table.pack(t:await(3)) end)
      E.P:submit(E.F.one):await(2) -- lets the spawned coroutine start waiting
      p:stop()
    end)
    return table.unpack(got, 1, got.n)
  end,
  expect = CLOSED, alone = true, deadline = 8,
}
add {
  name = "a map collected as garbage after its pool stopped",
  run = function(E)
    local p = E.suiro.pool { workers = 1 }
    do local _ = p:map(E.F.sleep, { 0.05, 0.05 }) end
    p:stop()
    collectgarbage()
    collectgarbage()
    return true
  end,
  expect = H.returns(true), alone = true,
}
add {
  name = "a prepared map run again after its pool stopped is refused clearly",
  run = function(E)
    local p = E.suiro.pool { workers = 1 }
    local pm = p:map_prepare(E.F.id, E.suiro.f64 { 1, 2 }, { template = "f64" })
    pm:run()
    p:stop()
    return pm:run()
  end,
  expect = H.any_of(CLOSED, H.raises_any("stopped", "closed")), alone = true,
}

-- wrong self
local wrong_self = {
  { "task.collect(5)", function(E) return getmetatable(E.P:submit(E.F.one)).__index.collect(5) end, "suiro.task" },
  { "task.collect(pool)", function(E) return getmetatable(E.P:submit(E.F.one)).__index.collect(E.P) end, "suiro.task" },
  { "task.ready({})", function(E) return getmetatable(E.P:submit(E.F.one)).__index.ready({}) end, "suiro.task" },
  { "pool.submit(task, f)", function(E)
    local t = E.P:submit(E.F.one)
    return E.P.submit(t, E.F.one)
  end, "suiro.pool" },
  { "pool.status(5)", function(E) return E.P.status(5) end, "suiro.pool" },
  { "pool.stop(nil)", function(E) return E.P.stop(nil) end, "suiro.pool" },
  { "pool.map(5, f, xs)", function(E) return E.P.map(5, E.F.id, { 1 }) end, "pool" },
  { "map.collect(task)", function(E)
    local m = E.P:map(E.F.id, { 1 })
    local t = E.P:submit(E.F.one)
    return m.collect(t)
  end, "suiro.map" },
  { "map.progress(5)", function(E) return E.P:map(E.F.id, { 1 }).progress(5) end, "suiro.map" },
  { "array.sum(5)", function(E) return E.suiro.f64({ 1 }).sum(5) end, "suiro.array" },
}
for _, w in ipairs(wrong_self) do
  add { name = ("%s is refused naming the expected type"):format(w[1]), run = w[2], expect = H.raises(w[3]) }
end

-- tasks used twice
local twice = {
  { "collect after collect", function(t) t:collect(5); return t:collect(5) end, "collected already" },
  { "collect after release", function(t) t:release(); return t:collect(5) end, "released" },
  { "await after collect", function(t) t:collect(5); return t:await(5) end, "collected already" },
  { "collect_all after collect", function(t, E) t:collect(5); return E.P:collect_all({ t }, 5) end, "collected already" },
  { "collect_all of a released task", function(t, E) t:release(); return E.P:collect_all({ t }, 5) end, "released" },
  { "collect_any of a released task", function(t, E) t:release(); return E.P:collect_any({ t }, 5) end, "released" },
}
for _, w in ipairs(twice) do
  add {
    name = ("a task: %s is refused (%s)"):format(w[1], w[3]),
    run = function(E) return w[2](E.P:submit(E.F.one), E) end,
    expect = H.raises(w[3]),
  }
end
add {
  name = "release twice and cancel after collect are harmless",
  run = function(E)
    local t = E.P:submit(E.F.one)
    t:release()
    t:release()
    local u = E.P:submit(E.F.one)
    u:collect(5)
    return u:cancel(), u:ready()
  end,
  expect = H.returns(false, false),
}

-- collect_all / collect_any misuse
local lists = {
  { "nil", function() return nil end, "tasks" },
  { "5", function() return 5 end, "tasks" },
  { '"x"', function() return "x" end, "tasks" },
  { "{5}", function() return { 5 } end, "tasks[1]" },
  { "{task, {}}", function(E) return { E.P:submit(E.F.one), {} } end, "tasks[2]" },
  { "{task, io.stdout}", function(E) return { E.P:submit(E.F.one), io.stdout } end, "tasks[2]" },
  { "{task of another pool}", function(E)
    local q = E.pool { workers = 1 }
    return { q:submit(E.F.one) }
  end, "tasks[1]" },
  { "{a map}", function(E) return { E.P:map(E.F.id, { 1 }) } end, "tasks[1]" },
}
for _, verb in ipairs { "collect_all", "collect_any" } do
  for _, l in ipairs(lists) do
    add {
      name = ("pool:%s(%s) is refused naming %s"):format(verb, l[1], l[3]),
      run = function(E) return E.P[verb](E.P, l[2](E), 5) end,
      expect = H.raises(verb, l[3]),
    }
  end
  add {
    name = ("pool:%s({t, t}) (the same task twice): a clear error naming tasks[2], or its value"):format(verb),
    run = function(E)
      local t = E.P:submit(E.F.one)
      local r, x = E.P[verb](E.P, { t, t }, 5)
      if verb == "collect_all" then return r[1], r[2] end
      return r, x
    end,
    expect = H.any_of(H.raises(verb, "tasks[2]"), verb == "collect_all" and H.returns(1, 1) or H.returns(1, 1)),
  }
end
add {
  name = "pool:collect_all({}) gives an empty table",
  run = function(E) return #E.P:collect_all({}, 1) end,
  expect = H.returns(0),
}
add {
  name = "pool:collect_any({}) is refused: no tasks",
  run = function(E) return E.P:collect_any({}, 1) end,
  expect = H.raises("collect_any", "no tasks"),
}
add {
  name = "collect_all of 20000 tasks gives every first value in order",
  run = function(E)
    local args = {}
    for i = 1, 20000 do args[i] = { i } end
    local r = E.P:collect_all(E.P:submit_batch(E.F.id, args), 30)
    for i = 1, 20000 do if r[i] ~= i then return false, i end end
    return true
  end,
  expect = H.returns(true), deadline = 40,
}
add {
  name = "one failure in collect_all leaves the other results collectable (issue 8 item 11)",
  run = function(E)
    local ts = { E.P:submit(E.F.one), E.P:submit(E.F.boom), E.P:submit(function() return 3 end) }
    local ok = pcall(E.P.collect_all, E.P, ts, 5)
    return ok, ts[1]:collect(5), ts[3]:collect(5)
  end,
  expect = H.returns(false, 1, 3),
}
add {
  name = 'collect_all(tasks, t, { errors = "return" }) puts error objects in place of failed values',
  run = function(E)
    local r = E.P:collect_all({ E.P:submit(E.F.one), E.P:submit(E.F.boom) }, 5, { errors = "return" })
    return r[1], E.suiro.is_error(r[2]), r[2].class
  end,
  expect = H.returns(1, true, "remote"),
}
add {
  name = 'collect_all(tasks, t, { errors = "bogus" }) is refused naming errors',
  run = function(E) return E.P:collect_all({ E.P:submit(E.F.one) }, 5, { errors = "bogus" }) end,
  expect = H.raises("collect_all", "errors"),
}

-- spawn and retire with bad numbers (issue 8 item 17: range-checked, never truncated)
for _, c in ipairs(V.bad_counts) do
  add {
    name = ("pool:spawn(%s) is refused naming the count"):format(c[1]),
    run = function(E)
      local p = E.pool { workers = 1, max_workers = 2 }
      return p:spawn(c[2])
    end,
    expect = H.raises("spawn"),
  }
  add {
    name = ("pool:retire(%s) is refused naming the slot"):format(c[1]),
    run = function(E)
      local p = E.pool { workers = 1, max_workers = 2 }
      local ok, e = pcall(p.retire, p, c[2], 2)
      return ok, ok or e, #p:status().workers
    end,
    expect = H.checker("raises naming retire and the slot, and no worker retired", function(o)
      if not o.ok then return false, "it raised outside pcall" end
      if o.v[1] then return false, "it retired (" .. tostring(o.v[3]) .. " workers left)" end
      if type(o.v[2]) ~= "string" or not o.v[2]:find("retire", 1, true) then return false, "message " .. tostring(o.v[2]) end
      if o.v[3] ~= 1 then return false, "workers left: " .. tostring(o.v[3]) end
      return true
    end),
  }
end
add {
  name = "pool:spawn(5) beyond max_workers = 2 is refused naming max_workers",
  run = function(E) return E.pool({ workers = 1, max_workers = 2 }):spawn(5) end,
  expect = H.raises("spawn", "max_workers"),
}
add {
  name = "pool:retire(7) of a slot that does not exist is refused naming it",
  run = function(E) return E.pool({ workers = 1, max_workers = 2 }):retire(7, 2) end,
  expect = H.raises("retire", "7"),
}

-- runaway tasks, kills, cancelled maps, deaths, map timeouts
add {
  name = "task:kill() stops a runaway task: class cancelled, and the pool serves the next task (issue 8 item 10)",
  run = function(E)
    local p = E.pool { workers = 1, timeout = "5s" }
    local t = p:submit(E.F.forever)
    local t0 = E.suiro.now()
    while p:status().workers[1].state ~= "busy" and E.suiro.now() - t0 < 2 do end
    t:kill()
    local ok, e = pcall(t.collect, t, 5)
    return ok, type(e) == "table" and e.class, p:submit(E.F.one):collect(5)
  end,
  expect = H.returns(false, "cancelled", 1), alone = true, deadline = 15,
}
add {
  name = "map:kill() stops a runaway map: class cancelled, and the pool serves the next task (issue 8 item 10)",
  run = function(E)
    local p = E.pool { workers = 1, timeout = "5s" }
    local m = p:map(E.F.forever, { 1, 2 })
    m:kill()
    local ok, e = pcall(m.collect, m, 5)
    return ok, type(e) == "table" and e.class, p:submit(E.F.one):collect(5)
  end,
  expect = H.returns(false, "cancelled", 1), alone = true, deadline = 15,
}
add {
  name = "a cancelled map's collect raises class cancelled, not made-up results (issue 8 item 9)",
  run = function(E)
    local p = E.pool { workers = 1 }
    local m = p:map(E.F.sleep, { 0.2, 0.2, 0.2, 0.2 }, { template = "f64" })
    m:cancel()
    return m:collect(5)
  end,
  expect = H.raises_obj { class = "cancelled" }, alone = true,
}
add {
  name = "the pool keeps serving after more worker deaths than CPUs (issue 8 item 1)",
  run = function(E)
    local p = E.pool { workers = 1, timeout = "5s" }
    for _ = 1, 4 do pcall(function() return p:submit(function() os.exit(1) end):collect(5) end) end
    return p:submit(E.F.one):collect(5)
  end,
  expect = H.returns(1), alone = true, deadline = 30,
}
add {
  name = "after worker deaths, collect() with no timeout still returns (issue 8 item 1)",
  run = function(E)
    local p = E.suiro.pool { workers = 2 }
    for _ = 1, 4 do pcall(function() return p:submit(function() os.exit(1) end):collect(5) end) end
    local v = p:submit(E.F.one):collect()
    p:stop()
    return v
  end,
  expect = H.returns(1), alone = true, deadline = 20,
}
add {
  name = "a worker dying inside a map: the error has index, slot and pid (issue 8 item 1)",
  run = function(E)
    local p = E.pool { workers = 2, timeout = "10s" }
    local ok, e = pcall(function()
      return p:map(function(i) if i == 3 then os.exit(1) end return i end, { 1, 2, 3, 4, 5, 6 }):collect(10)
    end)
    if ok then return "it returned" end
    return e.class, e.index, type(e.slot), type(e.pid)
  end,
  expect = H.returns("worker_died", 3, "number", "number"), alone = true, deadline = 20,
}
local function runaway_map_timeout(how)
  return function(E)
    local p = E.pool { workers = 1, timeout = how == "pool" and "1s" or nil }
    local m = p:map(function(i) if i == 1 then while true do end end return i end, { 1 },
      { timeout = how == "option" and "1s" or nil })
    local t0 = E.suiro.now()
    local v, why = m:collect(how == "argument" and 1 or nil)
    return E.suiro.now() - t0 < 3, v, why
  end
end
for _, how in ipairs { "argument", "option", "pool" } do
  add {
    name = ("a map with a runaway element: a 1 s timeout (%s) returns nil, \"timeout\" on time (issue 8 item 5)"):format(how),
    run = runaway_map_timeout(how),
    expect = H.returns(true, nil, "timeout"), alone = true, deadline = 10,
  }
end
add {
  name = "a map of a 3 s element with timeout = \"1s\" returns by 1.5 s (issue 8 item 5)",
  run = function(E)
    local p = E.pool { workers = 1 }
    local m = p:map(E.F.sleep, { 3 }, { timeout = "1s" })
    local t0 = E.suiro.now()
    local v, why = m:collect()
    return E.suiro.now() - t0 < 1.5, v, why
  end,
  expect = H.returns(true, nil, "timeout"), alone = true, deadline = 10,
}
add {
  name = "a map that timed out can be collected later (issue 8 item 5)",
  run = function(E)
    local p = E.pool { workers = 1 }
    local m = p:map(E.F.sleep, { 0.5 })
    local v, why = m:collect(0.05)
    local r = m:collect(5)
    return v, why, r[1]
  end,
  expect = H.returns(nil, "timeout", 0.5), alone = true, deadline = 10,
}
add {
  name = "a task that stops its worker's current pool does not break nested submits later (issue 8 item 13)",
  run = function(E)
    local p = E.pool { workers = 1, timeout = "5s" }
    pcall(function() return p:submit(function() require("suiro").current_pool():stop() end):collect(5) end)
    return p:submit(function()
      local suiro = require "suiro"
      return suiro.current_pool():submit(function() return 5 end):collect(5)
    end):collect(5)
  end,
  expect = H.returns(5), alone = true,
}
add {
  name = "suiro.spawn after a failed suiro.run is refused: only inside suiro.run (issue 8 item 13)",
  run = function(E)
    pcall(E.suiro.run, function() error("fails") end)
    return E.suiro.spawn(function() end)
  end,
  expect = H.raises("suiro.spawn", "only inside suiro.run"),
}
add {
  name = "suiro.run(5) is refused naming argument 1",
  run = function(E) return E.suiro.run(5) end,
  expect = H.raises("suiro.run", "argument 1"),
}
add {
  name = "an error in a coroutine started with suiro.spawn surfaces from suiro.run",
  run = function(E)
    return E.suiro.run(function()
      E.suiro.spawn(function() error("spawned fails") end)
      return 1
    end)
  end,
  expect = H.raises_any("spawned fails"),
}
add {
  name = "dropped task handles give their result slots back (result_slots = 64, 1000 submits; issue 8 item 8)",
  run = function(E)
    local p = E.pool { workers = 1, result_slots = 64, timeout = "5s" }
    local accepted = 0
    for _ = 1, 1000 do
      local t = p:submit(E.F.one)
      if t then accepted = accepted + 1 end
    end
    return accepted
  end,
  expect = H.returns(1000), alone = true, deadline = 30,
}

return cases
