-- Long constructor loops end at a signal (issue 17, item 2): a count the budget allows can still
-- take long, and SIGTERM / SIGINT must end it ("terminated" / "interrupted!") rather than wait for
-- it. The script runs as a child of its own (suiro run, under a 2 GiB data limit) with a deadline;
-- it must end inside the constructor's call (a signal seen only after the call returns would let
-- the script print "first done").
local suiro = require "suiro"
local support = require "tests.lua.support"

local bin = support.root .. "/build/bin/suiro"

local function wait_until(cond, secs, what)
  local t0 = suiro.now()
  while not cond() do
    if suiro.now() - t0 > secs then error("timed out waiting for " .. what, 2) end
    os.execute("sleep 0.01")
  end
end

local function slurp(path)
  local f = io.open(path)
  local s = f and f:read("a") or ""
  if f then f:close() end
  return s
end

describe("a long constructor loop", function()
  for _, sig in ipairs { { "TERM", "terminated" }, { "INT", "interrupted!" } } do
    for _, ctor in ipairs {
      { "suiro.factor", "suiro.factor { n = 1 << 28 }" },
      { "suiro.strings", "suiro.strings { n = 1 << 26 }" },
      { "suiro.frame", "suiro.frame { a = { n = 1 << 26 } }" },
    } do
      it(("%s ends at SIG%s"):format(ctor[1], sig[1]), function()
        local script = os.tmpname()
        local f = assert(io.open(script, "w"))
        f:write(("local suiro = require 'suiro'\nio.stdout:write('ready\\n') io.stdout:flush()\n"
          .. "local x = %s\nprint('first done')\n"):format(ctor[2]))
        f:close()
        local out = script .. ".out"
        -- under AddressSanitizer (its shadow is private memory) the engine's budget stands in
        local limit = (os.getenv("LD_PRELOAD") or ""):find("asan") and "export SUIRO_MAX_BYTES=2G;"
          or "ulimit -d 2097152;"
        local pid = tonumber((support.sh(("%s %s run %s > %s 2>&1 & echo $!"):format(limit, bin, script, out))))
        local ok, err = pcall(function()
          wait_until(function() return slurp(out):find("ready") end, 20, "the script")
          os.execute("sleep 0.2")
          os.execute(("kill -%s %d"):format(sig[1], pid))
          wait_until(function() return not io.open("/proc/" .. pid .. "/cmdline") end, 20, "the script to end")
        end)
        os.execute("kill -9 " .. pid .. " 2>/dev/null")
        local text = slurp(out)
        os.remove(script)
        os.remove(out)
        assert(ok, err)
        assert.is_nil(text:find("first done"), text)
        assert.is_truthy(text:find(sig[2], 1, true), text)
      end)
    end
  end
end)
