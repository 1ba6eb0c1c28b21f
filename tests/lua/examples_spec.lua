-- Every example in examples/ runs as documented and prints what it promises.
local suiro = require "suiro"
local sh = require("tests.lua.support").sh

local PY = "PYTHONPATH=bindings/python /usr/bin/python3 "
local R = "R_LIBS=build/R-lib SUIRO_WORKER_EXE=build/bin/suiro "
  .. "SUIRO_PY_WORKER=bindings/python/suiro/_worker.py Rscript "

-- command, then the patterns its output must match
local examples = {
  { "build/bin/suiro run examples/quickstart.lua", "1 %+ 2 =%s+3", "counted 20000 lines in 8 chunks",
    "error caught:%s+remote%s+examples/quickstart.lua:%d+: no such canal", "worker 1 %(pid %d+%): idle" },
  { "build/bin/suiro run examples/nested.lua", "sorted 5000 numbers with nested tasks on 1 worker" },
  { "build/bin/suiro run examples/async.lua", "sum of squares 1..8 =%s+204" },
  { "build/bin/suiro run examples/pipeline.lua", "parsed 2000 records in 8 chunks",
    "stage env seen by the parse workers:%s+parse" },
  { "build/bin/suiro run examples/map.lua", "streamed%s+1000%s+results",
    "failed as expected:%s+true%s+at element%s+42" },
  { "build/bin/suiro run examples/nested_map.lua", "1 worker%(s%): 2635310 4818361 6239529 7388808",
    "2 worker%(s%): 2635310 4818361 6239529 7388808" },
  { "build/bin/suiro run examples/bootstrap.lua", "bitwise identical across worker counts:%s+true" },
  { "build/bin/suiro run examples/channels.lua",
    "produced 100000, squared 100000, received 100000 squares summing to 333338333350000" },
  -- without mpirun: the local host alone (tests/mpi runs it on three ranks and compares)
  { "build/bin/suiro run examples/cluster_map.lua", "squares: 100000 elements, sum 333338333350000",
    "nested: 2635310.2328 4818361.2879 6239529.1398", "error: ok=false element=7777 message=no luck with 7777",
    "tasks: 42 72 110 156" },
  { "build/bin/embed_example", "part 4: 7388808", "sum of sqrt%(1..100000%) = 21082008.974" },
  -- the Python and R faces, with the checkout's builds (what scripts/python and scripts/rscript set)
  { PY .. "examples/quickstart.py", "1 %+ 2 = 3", "counted 20000 lines in 8 chunks",
    "water%s+16232\n%s+canal%s+16148\n%s+stream%s+16114",
    "error caught: LookupError no such canal %(worker traceback attached: True%)",
    "worker 1 %(pid %d+%): idle" },
  { R .. "examples/quickstart.R", "1 %+ 2 = 3", "counted 20000 lines in 8 chunks",
    "water%s+16232\n%s+canal%s+16148\n%s+stream%s+16114", "error caught: simpleError no such canal",
    "worker 1 %(pid %d+%): idle" },
  -- the cluster example from Python and R hosts, without mpirun (tests/mpi: three ranks, as Lua's)
  { PY .. "examples/cluster_map.py", "squares: 100000 elements, sum 333338333350000",
    "pi ~ 3.14351400 from 4000000 seeded draws", "seeded floats: hash c42edc17ca2d",
    "error: ok=false element=7777 message=no luck with 7777", "tasks: 42 72 110 156" },
  { R .. "examples/cluster_map.R", "squares: 100000 elements, sum 333338333350000",
    "pi ~ 3.14351400 from 4000000 seeded draws", "seeded floats: hash c42edc17ca2d",
    "error: ok=false element=7777 message=no luck with 7777", "tasks: 42 72 110 156" },
  { R .. "examples/interop.R", "cyl%s+mpg\n1%s+4 26.66364\n2%s+6 19.74286\n3%s+8 15.10000" },
  { PY .. "examples/interop.py", "cyl%s+mpg\n0%s+4.0%s+26.663636\n1%s+6.0%s+19.742857\n2%s+8.0%s+15.100000" },
}

describe("examples", function()
  for _, e in ipairs(examples) do
    it(e[1], function()
      local out, code = sh(e[1])
      assert.are.equal(0, code, out)
      for k = 2, #e do assert.matches(e[k], out) end
    end)
  end

  it("pools.lua is the config pipeline.lua opens", function()
    local pools <close> = suiro.open "examples/pools.lua"
    assert.are.equal(2, #pools.parse:status().workers)
    assert.are.equal(1, #pools.score:status().workers)
  end)
end)
