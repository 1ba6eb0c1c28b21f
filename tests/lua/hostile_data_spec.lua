-- Hostile battery (issue 8): arrays, ranges, maps, templates, frames. See tests/lua/hostile.lua.
require("tests.lua.hostile").spec("hostile: data", "data", describe, it)
