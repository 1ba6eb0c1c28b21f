-- bench_channels.lua — channels from Lua, against a luv pipe between two processes, in one run.
--
--   scripts/bench channels [rounds]      (build/bin/suiro run bench/bench_channels.lua [rounds])
--
-- lua_chan_msgs_per_s        small messages (an integer) one way: tx:send in a Lua worker,
--                            rx:recv here, timed from the first message to the sender's close
-- lua_chan_batch_msgs_per_s  the same with tx:send_batch (1000 per call) and rx:recv_batch(1000)
-- lua_luv_pipe_msgs_per_s    the same through a pipe between two lua5.4 processes, read with luv
--                            (bench/bench_channels_luv.lua, run here as a child), one write per
--                            message; lua_luv_pipe_buffered_msgs_per_s with the writes buffered
--                            in 64 KiB blocks (a stream: compare with send_batch)
-- lua_chan_pingpong_ns       send here, the worker sends it back over a second channel, receive
-- lua_pool_rt_ns             the same face's pool round trip: pool:submit(f, 1):collect()
--
-- Rounds interleave the figures; medians. The last line of output is JSON.
local suiro = require "suiro"

local here = (arg and arg[0] and arg[0]:match("^(.*)/[^/]*$")) or "bench"
local median = dofile(here .. "/stats.lua").median
local rounds = tonumber(arg and arg[1]) or 3
local N_SMALL, N_BATCH, N_PING = 1000000, 5000000, 20000

local pool <close> = suiro.pool { workers = 1 }

local function one_way(n)
  local tx, rx = suiro.channel { capacity = 4096 }
  local t = pool:submit(function(out, k)
    local send = out.send
    for i = 1, k do send(out, i) end
    out:close()
    return k
  end, tx, n)
  assert(rx:recv(30))
  local t0 = suiro.now()
  local got = 1
  local recv = rx.recv
  while true do
    local v, why = recv(rx)
    if v == nil then
      assert(why == "closed", why)
      break
    end
    got = got + 1
  end
  local dt = suiro.now() - t0
  assert(got == n and t:collect(30) == n)
  return (n - 1) / dt
end

local function batch(n, b)
  local tx, rx = suiro.channel { capacity = 4096 }
  local t = pool:submit(function(out, k, m)
    local xs = {}
    for i = 1, m do xs[i] = i end
    for _ = 1, k // m do out:send_batch(xs) end
    out:close()
    return k
  end, tx, n, b)
  local got = #assert(rx:recv_batch(b, 30))
  local t0 = suiro.now()
  while true do
    local vs = rx:recv_batch(b)
    if not vs then break end
    got = got + #vs
  end
  local dt = suiro.now() - t0
  assert(got == n and t:collect(30) == n)
  return (n - b) / dt
end

local function pingpong(n, warm)
  local atx, arx = suiro.channel()
  local btx, brx = suiro.channel()
  local t = pool:submit(function(inp, out, k)
    for _ = 1, k do out:send(inp:recv()) end
    out:close()
    return k
  end, arx, btx, n + warm)
  for i = 1, warm do
    atx:send(i)
    brx:recv(30)
  end
  local t0 = suiro.now()
  for i = 1, n do
    atx:send(i)
    brx:recv()
  end
  local dt = suiro.now() - t0
  assert(t:collect(30) == n + warm)
  return dt / n * 1e9
end

local function pool_rt(n, warm)
  local f = function(x) return x end
  for _ = 1, warm do pool:submit(f, 1):collect() end
  local t0 = suiro.now()
  for _ = 1, n do pool:submit(f, 1):collect() end
  return (suiro.now() - t0) / n * 1e9
end

local function luv_pipe(n, mode)
  local f = io.popen(("lua5.4 %s/bench_channels_luv.lua %d %s"):format(here, n, mode or ""))
  local out = f:read("a")
  f:close()
  local v = tonumber(out:match("luv_pipe_msgs_per_s%s+([%d.]+)"))
  return v
end

local keys = { "lua_chan_msgs_per_s", "lua_chan_batch_msgs_per_s", "lua_luv_pipe_msgs_per_s",
               "lua_luv_pipe_buffered_msgs_per_s", "lua_chan_pingpong_ns", "lua_pool_rt_ns" }
local figs = {}
for _, k in ipairs(keys) do figs[k] = {} end
one_way(10000) -- warm: the worker compiled the functions
for _ = 1, rounds do
  table.insert(figs.lua_chan_msgs_per_s, one_way(N_SMALL))
  table.insert(figs.lua_chan_batch_msgs_per_s, batch(N_BATCH, 1000))
  local lp = luv_pipe(N_SMALL // 4)
  if lp then table.insert(figs.lua_luv_pipe_msgs_per_s, lp) end
  lp = luv_pipe(N_SMALL, "buffered")
  if lp then table.insert(figs.lua_luv_pipe_buffered_msgs_per_s, lp) end
  table.insert(figs.lua_chan_pingpong_ns, pingpong(N_PING, 2000))
  table.insert(figs.lua_pool_rt_ns, pool_rt(N_PING, 2000))
end
local med = {}
for _, k in ipairs(keys) do med[k] = #figs[k] > 0 and median(figs[k]) or nil end
local function ratio(a, b) return med[a] and med[b] and med[a] / med[b] or 0 / 0 end
local notes = {
  lua_chan_msgs_per_s = ("%.1fx the luv pipe (>= 20x)"):format(ratio("lua_chan_msgs_per_s", "lua_luv_pipe_msgs_per_s")),
  lua_chan_batch_msgs_per_s = "target >= 3 M/s",
  lua_luv_pipe_msgs_per_s = "luv pipe, one write per message",
  lua_luv_pipe_buffered_msgs_per_s = ("luv pipe, 64 KiB writes (batch: %.1fx)"):format(
    ratio("lua_chan_batch_msgs_per_s", "lua_luv_pipe_buffered_msgs_per_s")),
  lua_chan_pingpong_ns = ("%.2fx the pool round trip (<= 1.5x)"):format(
    ratio("lua_chan_pingpong_ns", "lua_pool_rt_ns")),
  lua_pool_rt_ns = "",
}
for _, k in ipairs(keys) do
  print(("%-26s %14.1f  %s"):format(k, med[k] or 0 / 0, notes[k]))
end
local parts = { ('"bench":"channels_lua","rounds":%d'):format(rounds) }
for _, k in ipairs(keys) do
  if med[k] then parts[#parts + 1] = ('"%s":%.3f'):format(k, med[k]) end
end
print("{" .. table.concat(parts, ",") .. "}")
