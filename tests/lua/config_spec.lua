-- Config scripts: suiro.open, validation with columns and key suggestions.
local suiro = require "suiro"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

describe("suiro.open", function()
  local dir = os.tmpname()
  os.remove(dir)
  os.execute("mkdir -p " .. dir)
  teardown(function() os.execute("rm -rf " .. dir) end)

  it("opens named pools lazily and stops them on close", function()
    write(dir .. "/pools.lua", [[
      return {
        fast = { workers = 2, timeout = "30s", env = { MODE = "fast" } },
        single = { workers = 1, launcher = "lua", start_timeout = "5s" },
      }
    ]])
    local pools <close> = suiro.open(dir .. "/pools.lua")
    assert.are.equal(6, pools.fast:submit(function(a, b) return a * b end, 2, 3):collect())
    assert.are.equal("fast", pools.fast:submit(function() return os.getenv("MODE") end):collect())
    assert.are.equal(1, #pools.single:status().workers)
    assert.are.equal(pools.fast, pools.fast) -- one pool per name, created once
    assert.has_error(function() return pools.nope end)
  end)

  it("rejects unknown keys with the list of valid ones", function()
    write(dir .. "/bad.lua", "return { p = { wrokers = 2 } }")
    local ok, err = pcall(suiro.open, dir .. "/bad.lua")
    assert.is_false(ok)
    assert.matches('unknown key "wrokers" in pool "p" %(valid keys: .*workers%); did you mean workers%?', err)
  end)

  it("reports a malformed duration with its column", function()
    write(dir .. "/dur.lua", 'return { p = { workers = 1, timeout = "25 0ms" } }')
    local ok, err = pcall(suiro.open, dir .. "/dur.lua")
    assert.is_false(ok)
    assert.matches('bad duration "25 0ms": unexpected "0ms" at column 4', err, 1, true)
  end)

  it("reports a bad launcher", function()
    write(dir .. "/l.lua", 'return { p = { launcher = "perl" } }')
    local ok, err = pcall(suiro.open, dir .. "/l.lua")
    assert.is_false(ok)
    assert.matches('pool "p": launcher: must be "lua", "python", "r"', err, 1, true)
  end)

  it("takes a backend: local, or mpi (the local host alone outside an MPI job)", function()
    write(dir .. "/b.lua", 'return { m = { workers = 1, backend = "mpi" }, l = { workers = 1, backend = "local" } }')
    local pools <close> = suiro.open(dir .. "/b.lua")
    assert.are.equal(5, pools.m:submit(function() return 5 end):collect(10))
    assert.are.equal(1, #pools.m:status().hosts)
    assert.are.equal(6, pools.l:submit(function() return 6 end):collect(10))
    write(dir .. "/bb.lua", 'return { p = { backend = "cluster" } }')
    local ok, err = pcall(suiro.open, dir .. "/bb.lua")
    assert.is_false(ok)
    assert.matches('pool "p": backend: must be "local" or "mpi", got "cluster"', err, 1, true)
  end)

  it("reports a syntax error in the file", function()
    write(dir .. "/syn.lua", "return { p = ")
    local ok, err = pcall(suiro.open, dir .. "/syn.lua")
    assert.is_false(ok)
    assert.matches("syn.lua", err)
  end)
end)
