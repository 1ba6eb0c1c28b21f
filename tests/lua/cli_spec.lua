-- The suiro command line: run, version, doctor, help; exit statuses 0 / 1 / 2.
local suiro_bin = "build/bin/suiro"

local sh = require("tests.lua.support").sh

local function script(text)
  local path = os.tmpname() .. ".lua"
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

describe("suiro CLI", function()
  it("runs a script with arguments and the engine loaded", function()
    local p = script([[
      local suiro = require "suiro"
      local pool <close> = suiro.pool { workers = 1 }
      local a, b = ...
      print(arg[0] ~= nil, a, b, pool:submit(function(x) return x * 2 end, tonumber(arg[1])):collect())
    ]])
    local out, code = sh(suiro_bin .. " run " .. p .. " 21 x")
    os.remove(p)
    assert.are.equal(0, code)
    assert.are.equal("true\t21\tx\t42\n", out)
  end)

  it("exits 1 and prints the error when the script fails", function()
    local p = script("error('broken on purpose')")
    local out, code = sh(suiro_bin .. " run " .. p)
    os.remove(p)
    assert.are.equal(1, code)
    assert.matches("broken on purpose", out)
  end)

  it("exits 1 for a missing file", function()
    local out, code = sh(suiro_bin .. " run /nonexistent/x.lua")
    assert.are.equal(1, code)
    assert.matches("cannot open", out)
  end)

  it("exits 2 on usage errors", function()
    local out, code = sh(suiro_bin .. " frobnicate")
    assert.are.equal(2, code)
    assert.matches("unknown command 'frobnicate'", out)
    local _, code2 = sh(suiro_bin)
    assert.are.equal(2, code2)
    local _, code3 = sh(suiro_bin .. " run")
    assert.are.equal(2, code3)
  end)

  it("prints versions and help", function()
    local out, code = sh(suiro_bin .. " version")
    assert.are.equal(0, code)
    assert.matches("^suiro %d+%.%d+%.%d+ %(Lua 5%.4", out)
    local help, hcode = sh(suiro_bin .. " --help")
    assert.are.equal(0, hcode)
    assert.matches("usage: suiro", help)
  end)

  it("doctor reports the Lua, Python and R launchers working", function()
    -- scripts/test installs Python 3 and R first, so every launcher must start and answer here
    local out, code = sh(suiro_bin .. " doctor")
    assert.are.equal(0, code)
    assert.matches("\nok%s+lua%s+workers start", "\n" .. out)
    assert.matches("\nok%s+python%s+workers start", "\n" .. out)
    assert.matches("\nok%s+r%s+workers start", "\n" .. out)
  end)

  it("works from stock lua5.4 with the documented paths", function()
    local p = script([[
      local suiro = require "suiro"
      local pool <close> = suiro.pool { workers = 1 }
      io.write(pool:submit(function() return "ok" end):collect())
    ]])
    local out, code = sh('LUA_PATH="lua/?.lua;lua/?/init.lua;;" LUA_CPATH="build/lib/?.so;;" lua5.4 ' .. p)
    os.remove(p)
    assert.are.equal(0, code)
    assert.are.equal("ok", out)
  end)
end)
