-- tests/mpi/rogue.lua MODE: rank 0 with a rogue last rank (tests/mpi/rogue.c MODE). The map (or
-- the task of rank 1) must fail with the error that names the rogue rank (mode "empty": the
-- rogue's empty task result reads as no values); prints
-- "rogue MODE: <class>: <message>" or "rogue MODE: no error (N elements)".
local suiro = require "suiro"
local mode = arg and arg[1] or ...
local pool <close> = suiro.pool { backend = "mpi", workers = 1 }
local ok, err
if mode == "task" then
  local ts = {}
  for i = 1, 3 do -- host 0 (local), rank 1, rank 2 (the rogue)
    ts[i] = pool:submit(function(k)
      if k == 2 then local t = os.time() + 2; while os.time() < t do end end -- rank 1 answers late
      return k
    end, i)
  end
  ok, err = pcall(ts[2].collect, ts[2], 30)
elseif mode == "empty" then -- the rogue answers its task with an empty result: no values
  local ts = {}
  for i = 1, 3 do ts[i] = pool:submit(function() end) end -- hosts 0, 1, 2: the last runs on the rogue
  local t = ts[3]
  ok, err = pcall(function() return select("#", t:collect(30)) .. " values" end)
else
  local opts = mode ~= "offsets" and { template = "f64" } or nil
  ok, err = pcall(function()
    -- ~20 us an element: the honest ranks are still at work when the rogue's answers arrive
    local r = pool:map(function(x)
      local t = os.clock() + 2e-5
      while os.clock() < t do end
      return x
    end, suiro.range(1, 30000), opts):collect(30)
    return #r
  end)
end
if ok then
  print(("rogue %s: no error (%s)"):format(mode, tostring(err)))
else
  print(("rogue %s: %s: %s"):format(mode, type(err) == "table" and err.class or "?",
    type(err) == "table" and err.message or tostring(err)))
end
