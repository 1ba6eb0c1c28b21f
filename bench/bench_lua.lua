-- bench_lua.lua — suiro from Lua, against the floor and the classic designs, in one run.
--
--   build/bin/suiro run bench/bench_lua.lua [rounds]      (scripts/bench lua)
--
-- floor_rt_ns                two processes ping-ponging on shared cache lines (bench_core --floor)
-- lua_rt_ns                  submit + collect of a trivial Lua function, one Lua worker
-- lua_pipelined_tasks_per_s  256 tasks in flight, one worker
-- lua_batched_tasks_per_s    submit_batch + collect_all of 1024 tasks, one worker
-- luv_rt_ns                  the same task through luv's work queue (thread pool)
-- pipe_pool_rt_ns            a forked Lua worker over pipes (the classic process pool)
-- worker_start_ms            pool of one Lua worker: create to first result
--
-- Rounds interleave every figure so drift on a noisy VM hits them alike; medians are reported.
-- The last line of output is JSON.

local suiro = require "suiro"

local rounds = tonumber(arg[1]) or 7
local root = arg[0]:match("^(.*)/bench/[^/]*$") or "."

local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua").median

local function floor_ns()
  local f = assert(io.popen(root .. "/build/bin/bench_core --floor --rounds 3"))
  local v = tonumber(f:read("l"))
  f:close()
  return v
end

local function peers()
  local f = assert(io.popen("lua5.4 " .. root .. "/bench/lua_peers.lua 1"))
  local out = f:read("a")
  f:close()
  local json = out:match("(%b{})%s*$")
  return tonumber(json:match('"luv_rt_ns":([%d.]+)')), tonumber(json:match('"pipe_pool_rt_ns":([%d.]+)'))
end

local identity = function(x) return x end

local function rt(pool, iters)
  for i = 1, 2000 do pool:submit(identity, i):collect() end
  local t0 = suiro.now()
  for i = 1, iters do pool:submit(identity, i):collect() end
  return (suiro.now() - t0) / iters * 1e9
end

local function pipelined(pool, n, window)
  local ring = {}
  local t0 = suiro.now()
  for i = 1, n + window do
    if i > window then ring[(i - window) % window + 1]:collect() end
    if i <= n then ring[i % window + 1] = pool:submit(identity, i) end
  end
  return n / (suiro.now() - t0)
end

local function batched(pool, n, batch)
  local args = {}
  for i = 1, batch do args[i] = { i } end
  local t0 = suiro.now()
  for _ = 1, n // batch do pool:collect_all(pool:submit_batch(identity, args)) end
  return (n // batch * batch) / (suiro.now() - t0)
end

local function start_ms()
  local t0 = suiro.now()
  local p = suiro.pool { workers = 1 }
  p:submit(identity, 1):collect()
  local dt = (suiro.now() - t0) * 1e3
  p:stop()
  return dt
end

local fl, lrt, pip, bat, luv, pipe, start = {}, {}, {}, {}, {}, {}, {}
local pool = suiro.pool { workers = 1 }
-- Each phase starts with a full collection, so none pays for the garbage of the one before.
for r = 1, rounds do
  fl[r] = floor_ns()
  collectgarbage()
  lrt[r] = rt(pool, 100000)
  collectgarbage()
  pip[r] = pipelined(pool, 300000, 256)
  collectgarbage()
  bat[r] = batched(pool, 1024 * 300, 1024)
  collectgarbage()
  luv[r], pipe[r] = peers()
  start[r] = start_ms()
end
pool:stop()

local s = {
  floor_rt_ns = median(fl), lua_rt_ns = median(lrt), lua_pipelined_tasks_per_s = median(pip),
  lua_batched_tasks_per_s = median(bat), luv_rt_ns = median(luv), pipe_pool_rt_ns = median(pipe),
  worker_start_ms = median(start),
}
print(("suiro Lua benchmark (%d rounds, medians; suiro %s)"):format(rounds, suiro.version))
print(("  %-28s %12.1f ns"):format("floor round trip", s.floor_rt_ns))
print(("  %-28s %12.1f ns   (%.2f x floor)"):format("Lua round trip", s.lua_rt_ns, s.lua_rt_ns / s.floor_rt_ns))
print(("  %-28s %12.2f M/s"):format("Lua pipelined tasks", s.lua_pipelined_tasks_per_s / 1e6))
print(("  %-28s %12.2f M/s"):format("Lua batched tasks", s.lua_batched_tasks_per_s / 1e6))
local row = "  %-28s %12.1f ns   (%.1f x suiro)"
print(row:format("luv work queue round trip", s.luv_rt_ns, s.luv_rt_ns / s.lua_rt_ns))
print(row:format("pipe pool round trip", s.pipe_pool_rt_ns, s.pipe_pool_rt_ns / s.lua_rt_ns))
print(("  %-28s %12.2f ms"):format("worker start", s.worker_start_ms))
print(('{"bench":"lua","rounds":%d,"floor_rt_ns":%.1f,"lua_rt_ns":%.1f,"lua_rt_vs_floor":%.3f,'
  .. '"lua_pipelined_tasks_per_s":%.0f,"lua_batched_tasks_per_s":%.0f,"luv_rt_ns":%.1f,"pipe_pool_rt_ns":%.1f,'
  .. '"luv_vs_lua":%.2f,"pipe_vs_lua":%.2f,"worker_start_ms":%.3f}'):format(
  rounds, s.floor_rt_ns, s.lua_rt_ns, s.lua_rt_ns / s.floor_rt_ns, s.lua_pipelined_tasks_per_s,
  s.lua_batched_tasks_per_s, s.luv_rt_ns, s.pipe_pool_rt_ns, s.luv_rt_ns / s.lua_rt_ns,
  s.pipe_pool_rt_ns / s.lua_rt_ns, s.worker_start_ms))
