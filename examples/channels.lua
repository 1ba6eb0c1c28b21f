-- A pipeline of channels across languages: a Lua stage streams numbers to a Python stage, which
-- streams their squares to an R stage that counts and sums them; every stage runs in its own
-- worker process and no value goes through this host, which only wires the stages together and
-- collects the three results.
--   build/bin/suiro run examples/channels.lua
local suiro = require "suiro"

local lua_pool <close> = suiro.pool { workers = 1 }
local py_pool <close> = suiro.pool { workers = 1, launcher = suiro.python {} }
local r_pool <close> = suiro.pool { workers = 1, launcher = suiro.r {} }

local numbers_tx, numbers_rx = suiro.channel { capacity = 1024 }
local squares_tx, squares_rx = suiro.channel { capacity = 1024 }

-- stage 1 (Lua): 1..n in batches, then close
local produced = lua_pool:submit(function(out, n)
  local batch = {}
  for i = 1, n do
    batch[#batch + 1] = i
    if #batch == 500 then out:send_batch(batch); batch = {} end
  end
  out:send_batch(batch)
  out:close()
  return n
end, numbers_tx, 100000)

-- stage 2 (Python): squares whatever arrives until the close
local squared = py_pool:submit(suiro.call { source = [[
n = 0
for v in inp:
    out.send(v * v)
    n += 1
out.close()
n
]], inp = numbers_rx, out = squares_tx })

-- stage 3 (R): counts and sums the squares in batches until the close
local consumed = r_pool:submit(suiro.call { source = [[
count <- 0
total <- 0
repeat {
  v <- suiro::suiro_recv_batch(inp, 1000, timeout = 60)
  if (inherits(v, "suiro_closed")) break
  if (suiro::suiro_is_sentinel(v)) stop("the stream stalled: ", class(v)[1])
  count <- count + length(v)
  total <- total + sum(unlist(v))
}
list(count = count, sum = total)
]], inp = squares_rx })

local got = consumed:collect(60)
print(("produced %d, squared %d, received %d squares summing to %d"):format(produced:collect(30),
  squared:collect(30), got.count, got.sum))
