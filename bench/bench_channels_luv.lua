-- bench_channels_luv.lua — the baseline of lua_chan_msgs_per_s: small messages (an integer,
-- one line each) one way through a pipe from a lua5.4 child process, read here with luv and
-- parsed back into integers, timed from the first chunk to the end of the stream.
--
--   lua5.4 bench/bench_channels_luv.lua [n] [buffered]     prints "luv_pipe_msgs_per_s <rate>"
--
-- By default the child writes each message as it is sent (one write per message, as a channel
-- publishes each send); with "buffered" it writes 64 KiB blocks of lines (a stream, no longer
-- messages that arrive when sent: the reference point for send_batch).
local uv = require "luv"

local n = tonumber(arg and arg[1]) or 1000000
local buffered = arg and arg[2] == "buffered"
local child = ([[
io.stdout:setvbuf(%s)
local write = io.write
for i = 1, %d do write(i .. "\n") end
]]):format(buffered and '"full", 65536' or '"no"', n)

local out = uv.new_pipe(false)
local handle = assert(uv.spawn("lua5.4", { args = { "-e", child }, stdio = { nil, out, 2 } }, function() end),
  "cannot start lua5.4")
local got, sum, rest, t0, t1 = 0, 0, "", nil, nil
local tonum = tonumber
out:read_start(function(err, data)
  assert(not err, err)
  if not data then
    t1 = uv.hrtime()
    out:close()
    return
  end
  if not t0 then t0 = uv.hrtime() end
  data = rest .. data
  local last = 1
  for line, e in data:gmatch("(%d+)\n()") do
    sum = sum + tonum(line)
    got = got + 1
    last = e
  end
  rest = data:sub(last)
end)
uv.run()
handle:close()
uv.run()
assert(got == n and sum == n * (n + 1) // 2, ("luv pipe: got %d messages"):format(got))
print(("luv_pipe_msgs_per_s %.1f"):format((n - 1) / ((t1 - t0) / 1e9)))
