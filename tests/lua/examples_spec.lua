-- Every example in examples/ runs as documented and prints what it promises.
local suiro = require "suiro"

local run = require("tests.lua.support").sh

local function example(name)
  local out, code = run("build/bin/suiro run examples/" .. name)
  assert.are.equal(0, code, out)
  return out
end

describe("examples", function()
  it("quickstart.lua", function()
    local out = example("quickstart.lua")
    assert.matches("1 %+ 2 =%s+3", out)
    assert.matches("counted 20000 lines in 8 chunks", out)
    assert.matches("error caught:%s+remote%s+examples/quickstart.lua:%d+: no such canal", out)
    assert.matches("worker 1 %(pid %d+%): idle", out)
  end)

  it("nested.lua", function()
    local out = example("nested.lua")
    assert.matches("sorted 5000 numbers with nested tasks on 1 worker", out)
  end)

  it("async.lua", function()
    local out = example("async.lua")
    assert.matches("sum of squares 1..8 =%s+204", out)
  end)

  it("pipeline.lua with its config pools.lua", function()
    local out = example("pipeline.lua")
    assert.matches("parsed 2000 records in 8 chunks", out)
    assert.matches("stage env seen by the parse workers:%s+parse", out)
    local pools <close> = suiro.open "examples/pools.lua"
    assert.are.equal(2, #pools.parse:status().workers)
    assert.are.equal(1, #pools.score:status().workers)
  end)

  it("map.lua", function()
    local out = example("map.lua")
    assert.matches("streamed%s+1000%s+results", out)
    assert.matches("failed as expected:%s+true%s+at element%s+42", out)
  end)

  it("nested_map.lua gives the documented sums with 1 and 2 workers", function()
    local out = example("nested_map.lua")
    assert.matches("1 worker%(s%): 2635310 4818361 6239529 7388808", out)
    assert.matches("2 worker%(s%): 2635310 4818361 6239529 7388808", out)
  end)

  it("bootstrap.lua is bitwise identical across worker counts", function()
    local out = example("bootstrap.lua")
    assert.matches("bitwise identical across worker counts:%s+true", out)
  end)

  it("embed/embed.c (build/bin/embed_example)", function()
    local out, code = run("build/bin/embed_example")
    assert.are.equal(0, code, out)
    assert.matches("part 4: 7388808", out)
    assert.matches("sum of sqrt%(1..100000%) = 21082008.974", out)
  end)
end)
