-- bench_mpi.lua — the MPI tier against the local pool, in one run on this machine (two ranks that
-- share its 2 vCPUs, so "hosts" compete for the same cores: a real cluster adds cores instead).
--
--   mpirun --oversubscribe -np 2 build/bin/suiro run bench/bench_mpi.lua [rounds]   (scripts/bench mpi)
--
-- local_1ms_ms             2000 elements of ~1 ms of Lua work, pool:map on 1 host x 2 workers
-- mpi_1ms_ms               the same on an MPI pool of 2 hosts x 2 workers (4 workers, 2 vCPUs)
-- mpi_1ms_1w_ms            the same on 2 hosts x 1 worker (2 workers, as many as the local pool)
-- mpi_1ms_ratio            mpi_1ms_ms / local_1ms_ms (about 1 here: the CPUs are the same ones)
-- local_trivial_ns_per_elt pool:map of f(x) = x over 10^5 elements, template f64, local pool
-- mpi_trivial_ns_per_elt   the same map on the 2-host MPI pool
-- mpi_overhead_ns_per_elt  what the MPI tier adds per element (median over rounds of the
--                          difference of the two, measured back to back)
-- task_rt_local_us         a trivial task's round trip on the local pool
-- task_rt_remote_us        the same to the other host (MPI both ways)
-- memcpy_80mb_ms           one memcpy of 80 MB: the floor for large values
-- send_80mb_ms             a fresh 80 MB f64 array sent to the other host as a task argument,
--                          until its result (the length) is back
-- resend_80mb_ms           the same array again: it is on that host already (once per host)
--
-- Rounds interleave the figures; medians; a table, then one JSON line last.

local suiro = require "suiro"
local probe = require "suiro.probe"
local mpi = require "suiro.mpi"

local rounds = tonumber(arg[1]) or 5
local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua").median

if not mpi.in_job() then
  io.stderr:write("bench_mpi: run it under mpirun with 2 ranks:\n" ..
    "  mpirun --oversubscribe -np 2 build/bin/suiro run bench/bench_mpi.lua\n")
  os.exit(2)
end

-- ~1 ms of Lua work, calibrated once, then fixed
local function work(x, iters)
  local s = 0.0
  for k = 1, iters do s = s + math.sin(x * k) end
  return s
end
local iters = 1000
do
  local t0 = suiro.now()
  for i = 1, 200 do work(i, iters) end
  local per = (suiro.now() - t0) / 200
  iters = math.max(1, math.floor(iters * 1e-3 / per + 0.5))
end
local one_ms = load(([[local iters = %d
return function(x) local s = 0.0 for k = 1, iters do s = s + math.sin(x * k) end return s end]]):format(iters))()

local loc <close> = suiro.pool { workers = 2 }
local two <close> = suiro.pool { backend = "mpi", workers = 2 }
local one <close> = suiro.pool { backend = "mpi", workers = 1 }
local hosts = two:status().hosts
assert(#hosts == 2, "bench_mpi wants 2 ranks, got " .. #hosts)
local core = mpi.load()
local function to_host1(pool, f, ...) return core.submit(pool._x, 1, f, ...) end -- pin a task to rank 1

local identity = function(x) return x end
local len = function(a) return #a end
local N = 100000
local range = suiro.range(1, N)
local jobs = suiro.range(1, 2000)
local BIG = 10 * 1000 * 1000 -- 80 MB of f64

-- warm every pool once (workers started, code cached on the hosts)
for _, p in ipairs { loc, two, one } do p:map(identity, range, { template = "f64" }):collect() end
to_host1(two, len, suiro.f64 { 1 }):collect()

local f = {}
local function add(name, v)
  f[name] = f[name] or {}
  table.insert(f[name], v)
end
for _ = 1, rounds do
  local t0 = suiro.now()
  loc:map(one_ms, jobs, { template = "f64" }):collect()
  add("local_1ms_ms", (suiro.now() - t0) * 1e3)
  t0 = suiro.now()
  two:map(one_ms, jobs, { template = "f64" }):collect()
  add("mpi_1ms_ms", (suiro.now() - t0) * 1e3)
  t0 = suiro.now()
  one:map(one_ms, jobs, { template = "f64" }):collect()
  add("mpi_1ms_1w_ms", (suiro.now() - t0) * 1e3)

  for _ = 1, 3 do
    t0 = suiro.now()
    local a = loc:map(identity, range, { template = "f64" }):collect()
    local tl = suiro.now() - t0
    t0 = suiro.now()
    local b = two:map(identity, range, { template = "f64" }):collect()
    local tm = suiro.now() - t0
    assert(#a == N and #b == N and b[N] == N)
    add("local_trivial_ns_per_elt", tl / N * 1e9)
    add("mpi_trivial_ns_per_elt", tm / N * 1e9)
    add("mpi_overhead_ns_per_elt", (tm - tl) / N * 1e9)
  end

  t0 = suiro.now()
  for _ = 1, 200 do loc:submit(identity, 1):collect() end
  add("task_rt_local_us", (suiro.now() - t0) / 200 * 1e6)
  t0 = suiro.now()
  for _ = 1, 50 do to_host1(two, identity, 1):collect() end
  add("task_rt_remote_us", (suiro.now() - t0) / 50 * 1e6)

  add("memcpy_80mb_ms", probe.memcpy_ms(BIG * 8, 3))
  local big = suiro.array("f64", BIG)
  t0 = suiro.now()
  assert(to_host1(two, len, big):collect() == BIG)
  add("send_80mb_ms", (suiro.now() - t0) * 1e3)
  t0 = suiro.now()
  assert(to_host1(two, len, big):collect() == BIG)
  add("resend_80mb_ms", (suiro.now() - t0) * 1e3)
  big = nil -- luacheck: ignore 311
  collectgarbage()
end

local s = {}
for k, v in pairs(f) do s[k] = median(v) end
s.mpi_1ms_ratio = s.mpi_1ms_ms / s.local_1ms_ms
s.mpi_1ms_1w_ratio = s.mpi_1ms_1w_ms / s.local_1ms_ms
s.send_80mb_vs_memcpy = s.send_80mb_ms / s.memcpy_80mb_ms

print(("suiro MPI benchmark (%d rounds, medians; 2 ranks on %s; %s)"):format(rounds, hosts[1].host, core.version()))
local function row(label, v, unit, note)
  print(("  %-52s %10.2f %-6s %s"):format(label, v, unit, note or ""))
end
row("map 2000 x ~1 ms, local pool, 1 host x 2 workers", s.local_1ms_ms, "ms", "(baseline)")
row("map 2000 x ~1 ms, MPI pool, 2 hosts x 2 workers", s.mpi_1ms_ms, "ms",
  ("%.2fx the baseline (the same 2 vCPUs)"):format(s.mpi_1ms_ratio))
row("map 2000 x ~1 ms, MPI pool, 2 hosts x 1 worker", s.mpi_1ms_1w_ms, "ms",
  ("%.2fx the baseline"):format(s.mpi_1ms_1w_ratio))
row("map of f(x) = x, 10^5 elements, local pool", s.local_trivial_ns_per_elt, "ns/elt")
row("the same on the MPI pool (2 hosts)", s.mpi_trivial_ns_per_elt, "ns/elt")
row("what the MPI tier adds per element", s.mpi_overhead_ns_per_elt, "ns/elt", "(target <= 2000)")
row("trivial task round trip, local pool", s.task_rt_local_us, "us")
row("trivial task round trip, to the other host", s.task_rt_remote_us, "us")
row("memcpy of 80 MB", s.memcpy_80mb_ms, "ms", "(floor)")
row("80 MB argument sent to the other host, result back", s.send_80mb_ms, "ms",
  ("%.1fx memcpy"):format(s.send_80mb_vs_memcpy))
row("the same argument again (already on that host)", s.resend_80mb_ms, "ms")
local keys = {}
for k in pairs(s) do keys[#keys + 1] = k end
table.sort(keys)
local parts = { ('"bench":"mpi","rounds":%d,"ranks":2,"work_iters":%d'):format(rounds, iters) }
for _, k in ipairs(keys) do parts[#parts + 1] = ('"%s":%.3f'):format(k, s[k]) end
print("{" .. table.concat(parts, ",") .. "}")
