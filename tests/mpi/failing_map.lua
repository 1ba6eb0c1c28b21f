-- tests/mpi/failing_map.lua K: a 3-rank job whose map fails at an element that depends on K
-- (so the failing range lands on any rank), with results large enough to need MPI's rendezvous
-- protocol (each range's results are more than 64 KiB) for even K and typed cells for odd K;
-- for K divisible by 3 the script itself fails while its map's results are on their way.
-- The script dies of that error; tests/mpi/stress.sh checks that every rank ends, in time,
-- leaving nothing behind. Prints "pids <rank pids and worker pids>" to stderr first.
local suiro = require "suiro"
local k = tonumber(arg and arg[1] or ...) or 1
local pool <close> = suiro.pool { backend = "mpi", workers = 2 }
local pids = {}
for _, h in ipairs(pool:status().hosts) do
  pids[#pids + 1] = h.pid
  for _, w in ipairs(h.workers) do pids[#pids + 1] = w.pid end
end
io.stderr:write("pids ", table.concat(pids, " "), "\n")
io.stderr:flush()
local n = 60000
local bad = 1 + (k * 7919) % n
local opts = k % 2 == 1 and { template = "f64" } or nil
local m = pool:map(function(x)
  if x == bad then error("element " .. x .. " fails on purpose") end
  if opts then return x end
  return { x, tostring(x) }
end, suiro.range(1, n), opts)
if k % 3 == 0 then error("the script fails on purpose with its map running") end
m:collect(30)
print("not reached")
