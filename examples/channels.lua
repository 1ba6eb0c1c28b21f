-- A pipeline of channels across languages: a Lua stage streams numbers to a Python stage, which
-- streams their squares to this Lua host; every stage runs in its own worker process and no value
-- goes through the host until the end. (R does not bind channels yet: an R consumer comes next.)
--   build/bin/suiro run examples/channels.lua
local suiro = require "suiro"

local lua_pool <close> = suiro.pool { workers = 1 }
local py_pool <close> = suiro.pool { workers = 1, launcher = suiro.python {} }

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

-- the consumer (this host)
local count, sum = 0, 0
for v in squares_rx:values() do
  count = count + 1
  sum = sum + v
end
print(("produced %d, squared %d, received %d squares summing to %d"):format(produced:collect(30),
  squared:collect(30), count, sum))
