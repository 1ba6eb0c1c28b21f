-- luacheck configuration (run by scripts/test)
std = "lua54"
max_line_length = 120
files["tests/lua"] = { std = "+busted" }
exclude_files = { "build/**" }
-- the hostile battery's case tables hold whole byte strings and calls on one line each
files["tests/lua/hostile"] = { std = "+busted", max_line_length = 160 }
