-- luacheck configuration (run by scripts/test)
std = "lua54"
max_line_length = 120
files["tests/lua"] = { std = "+busted" }
exclude_files = { "build/**" }
