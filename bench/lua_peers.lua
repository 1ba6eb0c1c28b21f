-- lua_peers.lua — the designs suiro is measured against, for the same trivial task.
--
--   lua5.4 bench/lua_peers.lua [rounds]
--
-- luv_rt_ns        luv's work queue (libuv thread pool, one Lua state per thread): queue one
--                  trivial work item, run the loop until its completion callback fires
-- pipe_pool_rt_ns  the classic process pool: a forked Lua worker reading requests from a pipe and
--                  writing results to another (via luv's spawn and pipes), one task in flight
--
-- Prints a table and, as the last line, JSON with the medians.

local uv = require "luv"

local rounds = tonumber(arg and arg[1]) or 7

local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua").median

local function now() return uv.hrtime() end -- ns

-- luv work queue -------------------------------------------------------------------------------

local function luv_round(iters)
  local done = 0
  local work = uv.new_work(function(x, y) return x + y end, function() done = done + 1 end)
  -- warm up the thread pool and its Lua states
  for _ = 1, 200 do
    local before = done
    work:queue(1, 2)
    while done == before do uv.run("once") end
  end
  local t0 = now()
  for _ = 1, iters do
    local before = done
    work:queue(1, 2)
    while done == before do uv.run("once") end
  end
  return (now() - t0) / iters
end

-- pipe pool ------------------------------------------------------------------------------------

local worker_src = [[
local write = io.write
io.stdout:setvbuf("no")
for line in io.lines() do
  local a, b = line:match("^(%S+) (%S+)$")
  write(tostring(tonumber(a) + tonumber(b)), "\n")
end
]]

local function pipe_round(iters)
  local stdin, stdout = uv.new_pipe(false), uv.new_pipe(false)
  local lua = "lua5.4"
  local handle = uv.spawn(lua, { args = { "-e", worker_src }, stdio = { stdin, stdout, 2 } },
    function() end)
  assert(handle, "cannot start lua5.4 for the pipe pool")
  local got, buf = 0, ""
  stdout:read_start(function(err, data)
    assert(not err, err)
    if data then
      buf = buf .. data
      for _ in buf:gmatch("[^\n]*\n") do got = got + 1 end
      buf = buf:match("[^\n]*$")
    end
  end)
  local function one()
    local before = got
    stdin:write("1 2\n")
    while got == before do uv.run("once") end
  end
  for _ = 1, 200 do one() end
  local t0 = now()
  for _ = 1, iters do one() end
  local dt = (now() - t0) / iters
  stdout:read_stop()
  stdin:close()
  stdout:close()
  handle:kill("sigterm")
  handle:close()
  uv.run("nowait")
  return dt
end

-- The first round of each warms up (libuv's thread pool starts its threads lazily; the first
-- spawn pays for loading lua5.4): measure from the second on, so the peers get their best case.
luv_round(3000)
pipe_round(500)
local luv, pipe = {}, {}
for r = 1, rounds do
  luv[r] = luv_round(3000)
  pipe[r] = pipe_round(3000)
end
local luv_ns, pipe_ns = median(luv), median(pipe)
print(("luv work queue round trip   %10.0f ns"):format(luv_ns))
print(("pipe pool round trip        %10.0f ns"):format(pipe_ns))
print(('{"bench":"lua_peers","rounds":%d,"luv_rt_ns":%.0f,"pipe_pool_rt_ns":%.0f}'):format(rounds, luv_ns, pipe_ns))
