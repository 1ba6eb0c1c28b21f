-- stats.lua — what every benchmark script reports: medians (loaded with dofile, next to them).
local M = {}

-- The median of a list of numbers (the list is left as it is).
function M.median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  local n = #c
  if n % 2 == 1 then return c[(n + 1) // 2] end
  return (c[n // 2] + c[n // 2 + 1]) / 2
end

return M
