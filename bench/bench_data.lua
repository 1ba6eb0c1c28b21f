-- bench_data.lua — large values: zero-copy views against one memcpy of the same data, one run.
--
--   build/bin/suiro run bench/bench_data.lua [rounds]      (scripts/bench data)
--
-- memcpy_80mb_ms     one memcpy of 80 MB between two warm buffers: the floor
-- fresh_80mb_ms      the host makes a new 80 MB f64 array, a Lua worker computes x * 2, the
--                    result comes back as a view, the host reads its sum
-- reuse_80mb_ms      the same with the input already a view (the previous result)
-- view_resend_us_*   a view of 8 KB .. 80 MB sent to a worker and returned unmodified (8 KB is
--                    below the 32 KiB zero-copy floor: it travels as a copy)
-- small_value_rt_ns  a 10-element table sent and returned
--
-- Medians over interleaved rounds; the last line is JSON.

local suiro = require "suiro"
local probe = require "suiro.probe"

local rounds = tonumber(arg[1]) or 7
local N = 10 * 1000 * 1000 -- 80 MB of f64

local median = dofile((arg[0]:match("^(.*)/[^/]*$") or ".") .. "/stats.lua").median

local double = function(x) return x * 2 end
local identity = function(x) return x end

local pool = suiro.pool { workers = 1 }
local sizes = { 8e3, 8e4, 8e5, 8e6, 8e7 }
local views = {}
for i, bytes in ipairs(sizes) do
  views[i] = pool:submit(identity, suiro.array("f64", math.floor(bytes / 8))):collect()
end
local small = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }

local mem, fresh, reuse, small_rt = {}, {}, {}, {}
local resend = {}
for i = 1, #sizes do resend[i] = {} end
local last = pool:submit(double, suiro.array("f64", N)):collect() -- warm both sides once
local expect = 0.0
for r = 1, rounds do
  mem[r] = probe.memcpy_ms(N * 8, 3)

  local t0 = suiro.now()
  local a = suiro.array("f64", N)
  local y = pool:submit(double, a):collect()
  local s = y:sum()
  fresh[r] = (suiro.now() - t0) * 1e3
  assert(s == 0.0 and y:isview())

  t0 = suiro.now()
  local z = pool:submit(double, last):collect()
  s = z:sum()
  reuse[r] = (suiro.now() - t0) * 1e3
  assert(s == expect and z:isview(), ("round %d: sum %s, view %s"):format(r, s, z:isview()))
  last = pool:submit(double, suiro.array("f64", N)):collect()

  for i = 1, #sizes do
    local v = views[i]
    local times = {}
    for k = 1, 21 do
      local t1 = suiro.now()
      local back = pool:submit(identity, v):collect()
      times[k] = (suiro.now() - t1) * 1e6
      -- below the zero-copy floor (32 KiB) a value travels as a copy, above it as a reference
      assert(#back == #v and (back:isview() or sizes[i] < 32768))
    end
    resend[i][r] = median(times)
  end

  local times = {}
  for k = 1, 2001 do
    local t1 = suiro.now()
    pool:submit(identity, small):collect()
    times[k] = (suiro.now() - t1) * 1e9
  end
  small_rt[r] = median(times)
end
pool:stop()

local out = {
  memcpy_80mb_ms = median(mem), fresh_80mb_ms = median(fresh), reuse_80mb_ms = median(reuse),
  small_value_rt_ns = median(small_rt),
}
print(("suiro data benchmark (%d rounds, medians; suiro %s)"):format(rounds, suiro.version))
print(("  %-40s %10.2f ms"):format("memcpy of 80 MB (the floor)", out.memcpy_80mb_ms))
print(("  %-40s %10.2f ms   (%.2f x memcpy)"):format("fresh 80 MB array, x * 2 in a worker", out.fresh_80mb_ms,
  out.fresh_80mb_ms / out.memcpy_80mb_ms))
print(("  %-40s %10.2f ms   (%.2f x memcpy)"):format("same, input already a view", out.reuse_80mb_ms,
  out.reuse_80mb_ms / out.memcpy_80mb_ms))
local labels = { "8kb", "80kb", "800kb", "8mb", "80mb" }
local json_views = {}
for i = 1, #sizes do
  local v = median(resend[i])
  out["view_resend_us_" .. labels[i]] = v
  local label = labels[i]:upper():gsub("KB", " KB"):gsub("MB", " MB")
  print(("  %-40s %10.2f us"):format("view sent and returned, " .. label, v))
  json_views[#json_views + 1] = ('"%s":%.2f'):format(labels[i], v)
end
print(("  %-40s %10.1f ns"):format("10-element table round trip", out.small_value_rt_ns))
print(('{"bench":"data","rounds":%d,"memcpy_80mb_ms":%.3f,"fresh_80mb_ms":%.3f,"reuse_80mb_ms":%.3f,'
  .. '"fresh_vs_memcpy":%.3f,"reuse_vs_memcpy":%.3f,"view_resend_us":{%s},"small_value_rt_ns":%.1f}'):format(
  rounds, out.memcpy_80mb_ms, out.fresh_80mb_ms, out.reuse_80mb_ms, out.fresh_80mb_ms / out.memcpy_80mb_ms,
  out.reuse_80mb_ms / out.memcpy_80mb_ms, table.concat(json_views, ","), out.small_value_rt_ns))
