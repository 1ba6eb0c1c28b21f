-- The hostile battery's child: `suiro run tests/lua/hostile_child.lua MODULE FROM TO` runs cases
-- FROM..TO of tests/lua/hostile/MODULE.lua in order and prints, for each,
--   BEGIN <index> <deadline>      before it runs (tests/lua/hostile_watch.sh enforces the deadline)
--   RESULT <index> <outcome>      after, the normalised outcome as Lua source (tests/lua/hostile.lua)
-- and marks the start of each case on stderr, so a sanitizer report can be traced to its case.
package.path = "lua/?.lua;lua/?/init.lua;./?.lua;" .. package.path

local H = require "tests.lua.hostile"
local suiro = require "suiro"

local mod, from, to = ...
local cases = require("tests.lua.hostile." .. mod)
from, to = tonumber(from), tonumber(to)

-- The environment every case gets.
local E = { suiro = suiro, H = H }
local owned = {}       -- pools made by E.pool, stopped after the case
local shared           -- E.P, made on first use, replaced when a case broke it
local idle             -- E.Z: a pool without workers (its tasks never run), made on first use

local function self_pid()
  local f = assert(io.open("/proc/self/stat"))
  local s = f:read("a")
  f:close()
  return tonumber(s:match("^(%d+)"))
end
E.pid = self_pid()

--- E.pool(opts): a new pool, stopped after the case.
function E.pool(opts)
  local p = suiro.pool(opts)
  owned[#owned + 1] = p
  return p
end

setmetatable(E, {
  __index = function(_, k)
    if k == "P" then
      shared = shared or suiro.pool { workers = 2, timeout = "20s" }
      return shared
    end
    if k == "Z" then
      idle = idle or suiro.pool { workers = 0, max_workers = 1 }
      return idle
    end
  end,
})

--- E.regions(): the names in /dev/shm of this process's family ("/suiro_<pid hex>_..."), sorted.
function E.regions()
  local out = {}
  local prefix = ("suiro_%x_"):format(E.pid)
  local f = io.popen("ls /dev/shm 2>/dev/null")
  for name in f:lines() do
    if name:sub(1, #prefix) == prefix then out[#out + 1] = "/" .. name end
  end
  f:close()
  table.sort(out)
  return out
end

--- E.file(text [, suffix]): a temporary file holding text; removed after the case.
local files = {}
function E.file(text, suffix)
  local path = os.tmpname() .. (suffix or ".lua")
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  files[#files + 1] = path
  return path
end

--- E.elapsed(f, ...): seconds f took, then its results.
function E.elapsed(f, ...)
  local t0 = suiro.now()
  local r = table.pack(f(...))
  return suiro.now() - t0, table.unpack(r, 1, r.n)
end

-- Task bodies shared by the cases. They capture nothing but globals (workers rebind _ENV).
E.F = {
  id = function(...) return ... end,
  one = function() return 1 end,
  sleep = function(s)
    local now = require("suiro").now
    local t0 = now()
    while now() - t0 < s do end
    return s
  end,
  forever = function()
    while true do end
  end,
  boom = function() error("boom") end,
}

local function after_case()
  for i = #owned, 1, -1 do pcall(owned[i].stop, owned[i]) end
  owned = {}
  for _, p in ipairs(files) do os.remove(p) end
  files = {}
  collectgarbage()
  if shared then -- a case that broke the shared pool must not fail the next ones
    local ok, v = pcall(function() return shared:submit(function() return 7 end):collect(5) end)
    if not ok or v ~= 7 then
      pcall(shared.stop, shared)
      shared = nil
      collectgarbage()
    end
  end
end

for i = from, to do
  local c = cases[i]
  io.stderr:write(("\n@@HOSTILE CASE %d@@\n"):format(i))
  io.stderr:flush()
  io.stdout:write(("BEGIN %d %g\n"):format(i, c.deadline or 20))
  io.stdout:flush()
  local t0 = suiro.now()
  local o = H.outcome(pcall(c.run, E))
  o.seconds = suiro.now() - t0
  local line = "RESULT " .. i .. " " .. H.serialise(o)
  after_case()
  io.stdout:write(line, "\n")
  io.stdout:flush()
end
if shared then shared:stop() end
if idle then idle:stop() end
os.exit(0, true)
