-- bench_map.lua — pool:map against a plain Lua loop, in one run.
--
--   build/bin/suiro run bench/bench_map.lua [rounds]      (scripts/bench map)
--
-- serial_identity_ns_per_elt  a plain Lua loop calling f(x) = x over 10^6 elements
-- map_identity_ns_per_elt     pool:map of the same f over 10^6 elements, 2 workers, template "f64"
-- serial_10us_ms              2,000 calls of about 10 us of Lua work each, in a loop
-- map_10us_ms                 the same 2,000 calls as pool:map on 2 workers
-- map_10us_speedup            serial_10us_ms / map_10us_ms
--
-- Rounds interleave the figures; medians are reported; the last line is JSON.

local suiro = require "suiro"

local rounds = tonumber(arg[1]) or 15

local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua").median

local N = 1000000
local identity = function(x) return x end

-- ~10 us of work: calibrated once on this machine, then fixed for every round
local function work(x, iters)
  local s = 0.0
  for k = 1, iters do s = s + math.sin(x * k) end
  return s
end
local iters = 100
do
  local t0 = suiro.now()
  for i = 1, 2000 do work(i, iters) end
  local per = (suiro.now() - t0) / 2000
  iters = math.max(1, math.floor(iters * 10e-6 / per + 0.5))
end
local tasks = {}
for i = 1, 2000 do tasks[i] = i end
local ten = function(x) return work(x, iters) end

local pool = suiro.pool { workers = 2 }
local input = suiro.range(1, N)
local sid, mid, s10, m10 = {}, {}, {}, {}
for r = 1, rounds do
  local t0 = suiro.now()
  local acc = 0
  for i = 1, N do acc = acc + identity(i) end
  sid[r] = (suiro.now() - t0) / N * 1e9
  assert(acc == N * (N + 1) // 2)

  t0 = suiro.now()
  local ys = pool:map(identity, input, { template = "f64" }):collect()
  mid[r] = (suiro.now() - t0) / N * 1e9
  assert(#ys == N and ys[N] == N)

  t0 = suiro.now()
  for i = 1, #tasks do work(tasks[i], iters) end
  s10[r] = (suiro.now() - t0) * 1e3

  t0 = suiro.now()
  pool:map(ten, tasks, { template = "f64" }):collect()
  m10[r] = (suiro.now() - t0) * 1e3
end
pool:stop()

local s = {
  serial_identity_ns_per_elt = median(sid), map_identity_ns_per_elt = median(mid),
  serial_10us_ms = median(s10), map_10us_ms = median(m10),
}
s.map_10us_speedup = s.serial_10us_ms / s.map_10us_ms
print(("suiro map benchmark (%d rounds, medians; 2 workers; suiro %s)"):format(rounds, suiro.version))
print(("  %-36s %10.1f ns"):format("serial loop, identity, per element", s.serial_identity_ns_per_elt))
print(("  %-36s %10.1f ns"):format("pool:map, identity, per element", s.map_identity_ns_per_elt))
print(("  %-36s %10.2f ms"):format("serial, 2000 x ~10 us", s.serial_10us_ms))
print(("  %-36s %10.2f ms   (speedup %.2f)"):format("pool:map, 2000 x ~10 us", s.map_10us_ms, s.map_10us_speedup))
print(('{"bench":"map","rounds":%d,"serial_identity_ns_per_elt":%.2f,"map_identity_ns_per_elt":%.2f,'
  .. '"serial_10us_ms":%.3f,"map_10us_ms":%.3f,"map_10us_speedup":%.3f,"work_iters":%d}'):format(
  rounds, s.serial_identity_ns_per_elt, s.map_identity_ns_per_elt, s.serial_10us_ms, s.map_10us_ms,
  s.map_10us_speedup, iters))
