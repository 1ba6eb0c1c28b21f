-- Helpers shared by the specs.
local M = {}

-- Runs a shell command; returns its output (stdout and stderr) and its exit status.
function M.sh(cmd)
  local f = io.popen(cmd .. " 2>&1; echo \"exit=$?\"")
  local out = f:read("a")
  f:close()
  local code = tonumber(out:match("exit=(%d+)%s*$"))
  return (out:gsub("exit=%d+%s*$", "")), code
end

-- A pool shared by the tests of a describe block: made in its setup, stopped in its teardown.
-- Returns a stand-in that forwards to the pool (pool:submit(...), pool.collect_all(pool, ...)).
function M.block_pool(opts)
  local suiro = require "suiro"
  -- busted gives setup and teardown to the spec's environment, not to modules: take the caller's
  local env
  local caller = debug.getinfo(2, "f").func
  for i = 1, math.huge do
    local name, value = debug.getupvalue(caller, i)
    if not name then break end
    if name == "_ENV" then env = value end
  end
  local real
  env.setup(function() real = suiro.pool(opts) end)
  env.teardown(function() real:stop() end)
  local proxy = {}
  return setmetatable(proxy, {
    __index = function(_, k)
      local v = real[k]
      if type(v) ~= "function" then return v end
      return function(self, ...)
        if rawequal(self, proxy) then self = real end
        return v(self, ...)
      end
    end,
    __tostring = function() return tostring(real) end,
  })
end

-- The checkout the specs run in (busted runs from the repository root).
do
  local f = io.popen("pwd")
  M.root = f:read("l")
  f:close()
end

return M
