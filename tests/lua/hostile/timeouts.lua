-- Timeouts through every verb that waits (issue 8 item 14; docs/api.md "Timeouts are seconds
-- (numbers) or durations"): valid short durations give nil, "timeout" on time, valid long ones
-- wait and return the values, anything else is refused with an error naming the timeout.
local H = require "tests.lua.hostile"
local V = require "tests.lua.hostile.values"

local cases = {}
local function add(c) cases[#cases + 1] = c end

-- A task that never runs (its pool has no workers), and one that has finished.
local function never(E)
  return E.Z:submit(E.F.one), E.Z
end
local function done(E)
  local t = E.P:submit(E.F.one)
  while not t:ready() do end
  return t, E.P
end

-- Checks a nil, "timeout" that came on time: the case returns elapsed, v, why.
local function on_time(limit)
  return H.checker("returns nil, \"timeout\" after the timeout and within " .. limit .. " s", function(o)
    if not o.ok then return false, "it raised" end
    local dt, v, why = o.v[1], o.v[2], o.v[3]
    if v ~= nil or why ~= "timeout" then return false, "not nil, \"timeout\"" end
    if type(dt) ~= "number" or dt > limit then return false, "it took " .. tostring(dt) .. " s" end
    return true
  end)
end

local verbs = {
  { "task:collect", function(t, _, x) return t:collect(x) end },
  { "task:await outside suiro.run", function(t, _, x) return t:await(x) end },
  { "task:await inside suiro.run", function(t, E, x) return E.suiro.run(function() return t:await(x) end) end },
  { "pool:collect_all", function(t, _, x, p)
    local r, why = p:collect_all({ t }, x)
    if r then return r[1] end
    return r, why
  end },
  { "pool:collect_any", function(t, _, x, p)
    local i, v = p:collect_any({ t }, x)
    if i == 1 then return v end
    return i, v
  end },
}

for _, verb in ipairs(verbs) do
  local name, call = verb[1], verb[2]
  for _, tv in ipairs(V.short_timeouts) do
    add {
      name = ("%s(%s) on a task that never runs: nil, \"timeout\" on time"):format(name, tv[1]),
      run = function(E)
        local t, p = never(E)
        return E.elapsed(call, t, E, tv[2], p)
      end,
      expect = on_time(1.5), deadline = 5,
    }
  end
  for _, tv in ipairs(V.long_timeouts) do
    add {
      name = ("%s(%s) on a finished task: its value"):format(name, tv[1]),
      run = function(E)
        local t, p = done(E)
        return call(t, E, tv[2], p)
      end,
      expect = H.returns(1), deadline = 10,
    }
  end
  for _, tv in ipairs(V.bad_timeouts) do
    add {
      name = ("%s(%s) is refused naming the timeout"):format(name, tv[1]),
      run = function(E)
        local t, p = done(E)
        return call(t, E, tv[2], p)
      end,
      expect = H.raises("timeout"), deadline = 5,
    }
  end
end

-- The pool's timeout option: the default for collect without one.
for _, tv in ipairs(V.short_timeouts) do
  add {
    name = ("suiro.pool { timeout = %s }: collect() of a task that never runs gives nil, \"timeout\" on time"):format(tv[1]),
    run = function(E)
      local p = E.pool { workers = 0, max_workers = 1, timeout = tv[2] }
      local t = p:submit(E.F.one)
      return E.elapsed(t.collect, t)
    end,
    expect = on_time(1.5), deadline = 5,
  }
end
for _, tv in ipairs(V.long_timeouts) do
  add {
    name = ("suiro.pool { timeout = %s } starts and collects"):format(tv[1]),
    run = function(E)
      local p = E.pool { workers = 1, timeout = tv[2] }
      return p:submit(E.F.one):collect()
    end,
    expect = H.returns(1), deadline = 10,
  }
end
for _, tv in ipairs(V.bad_timeouts) do
  add {
    name = ("suiro.pool { timeout = %s } is refused naming timeout"):format(tv[1]),
    run = function(E) return E.pool { workers = 1, timeout = tv[2] } end,
    expect = H.raises("suiro.pool", "timeout"), deadline = 5,
  }
  add {
    name = ("suiro.pool { start_timeout = %s } is refused naming start_timeout"):format(tv[1]),
    run = function(E) return E.pool { workers = 1, start_timeout = tv[2] } end,
    expect = H.raises("suiro.pool", "start_timeout"), deadline = 5,
  }
end
for _, tv in ipairs(V.long_timeouts) do
  add {
    name = ("suiro.pool { start_timeout = %s } starts"):format(tv[1]),
    run = function(E) return E.pool({ workers = 1, start_timeout = tv[2] }):submit(E.F.one):collect(10) end,
    expect = H.returns(1), deadline = 10,
  }
end

-- Maps: the timeout option, m:collect(t), m:await(t), pm:run(xs, t).
local mverbs = {
  { "pool:map {timeout = t}:collect()", function(E, p, x) return p:map(E.F.id, { 1 }, { timeout = x }):collect() end },
  { "m:collect(t)", function(E, p, x) return p:map(E.F.id, { 1 }):collect(x) end },
  { "m:await(t) outside suiro.run", function(E, p, x) return p:map(E.F.id, { 1 }):await(x) end },
  { "pm:run(nil, t)", function(E, p, x) return p:map_prepare(E.F.id, { 1 }):run(nil, x) end },
}
local function first(v, ...)
  if type(v) == "table" or type(v) == "userdata" then return v[1] end
  return v, ...
end
for _, verb in ipairs(mverbs) do
  local name, call = verb[1], verb[2]
  for _, tv in ipairs(V.few_short_timeouts) do
    add {
      name = ("%s with t = %s, no worker to run it: nil, \"timeout\" on time"):format(name, tv[1]),
      run = function(E)
        local z = E.pool { workers = 0, max_workers = 1 }
        return E.elapsed(function() return first(call(E, z, tv[2])) end)
      end,
      expect = on_time(1.5), deadline = 4,
    }
  end
  for _, tv in ipairs(V.long_timeouts) do
    add {
      name = ("%s with t = %s: the results"):format(name, tv[1]),
      run = function(E) return first(call(E, E.P, tv[2])) end,
      expect = H.returns(1), deadline = 10,
    }
  end
  for _, tv in ipairs(V.bad_timeouts) do
    add {
      name = ("%s with t = %s is refused naming the timeout"):format(name, tv[1]),
      run = function(E) return first(call(E, E.P, tv[2])) end,
      expect = H.raises("timeout"), deadline = 4,
    }
  end
end

-- pool:retire(slot, timeout)
for _, tv in ipairs(V.few_bad_timeouts) do
  add {
    name = ("pool:retire(0, %s) is refused naming the timeout"):format(tv[1]),
    run = function(E)
      local p = E.pool { workers = 1 }
      return p:retire(0, tv[2])
    end,
    expect = H.raises("timeout"), deadline = 5,
  }
end
add {
  name = 'pool:retire(0, "5s") accepts a duration',
  run = function(E)
    local p = E.pool { workers = 1 }
    return p:retire(0, "5s")
  end,
  expect = H.returns(true), deadline = 10,
}

return cases
