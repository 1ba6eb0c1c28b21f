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

-- The checkout the specs run in (busted runs from the repository root).
do
  local f = io.popen("pwd")
  M.root = f:read("l")
  f:close()
end

return M
